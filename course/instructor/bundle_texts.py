"""What the student bundle tells its students (course.instructor.bundle writes it): marked for the
catalog with `N_`, and translated into the bundle's language when the bundle is made."""

from __future__ import annotations

from course.i18n import N_

README = N_(
    """# {course_id}: distributed deep learning with Chainer and ChainerMN

1. `./install.sh` once (Python 3.11; `EXTRAS=gpu ./install.sh` on a GPU node of a cluster).
2. `./start-jupyterlab.sh`, then open **Assignment List** (the Nbgrader menu): fetch
   `{assignment}` if it is not already in `{folder}/`, and work through its notebooks in
   order, `01_single_gpu` to `08_beyond_data_parallel`. Each notebook submits its
   training jobs for you (`qsub -j oe`, or this machine when the course runs without a cluster).
3. Submit from the Assignment List, or in a terminal in this folder with
   `.venv/bin/python -m course handin`: it runs nbgrader's submit and says plainly whether your
   work reached the exchange (a failed hand-in exits with status 1 and says why). What your jobs
   wrote travels with it: `runs/` and the job logs (`run_*.sh.o<number>`); the snapshots do not.
   Feedback comes back through the same list (**Fetch Feedback**).

The exchange is the folder your instructor set when making this copy: `{exchange}`
(`nbgrader_config.py`). If your instructor gives you another one, set `COURSE_EXCHANGE=/path` before
starting JupyterLab or handing in. `.venv/bin/python -m course doctor` says what works on the
machine you are on, and `.venv/bin/python -m course report {folder}/{assignment}`
prints the table of your runs.
"""
)
