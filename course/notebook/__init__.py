"""What the notebooks call: the setup cell, the script writer, the checks and the report.

course.notebook.setup("single_gpu")
course.notebook.write_script("single_gpu", [make_iterators, make_model_and_optimizer, build_trainer,
                                            add_snapshots])
"""

from course.lessons.run_part import directives
from course.notebook import handin
from course.notebook.scripts import write_script
from course.notebook.setup import setup

__all__ = ["directives", "handin", "setup", "write_script"]
