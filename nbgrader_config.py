"""nbgrader's configuration for the course (the repository root is the course directory).

solutions/ is nbgrader's source (with solutions and hidden tests), notebooks/ the student release
made from it by `python -m course release` (which runs nbgrader generate_assignment).
"""
c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "chainer-distributed-training"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# Kept out of releases and submissions: data sets, trainer snapshots, Python caches. Job outputs
# (runs/ and the *.o<number> logs) must stay in submissions: the grader reads them.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.npz", "*.tar.gz",
                            "snapshot_iter_*", "core", "core.*"]

# What a student finds in a cell to fill in.
c.ClearSolutions.code_stub = {"python": "# PUT YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# The stage-3 checks start two MPI ranks (a few seconds; more on a loaded machine).
c.Execute.timeout = 180
# ipykernel logs a warning about its local TCP transport at every kernel start; keep the kernels'
# own log to errors, so that the grading output shows the students' problems only.
c.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]

# Autograde copies the submission's files, then overwrites the ones whose names the source folder
# also has with the instructor's copies. These the student's notebook writes itself: keep theirs.
c.Autograde.exclude_overwriting = {"distributed_training": [
    "train_cifar_single.py", "train_cifar_multi_gpu.py", "train_cifar_multi_node.py"]}
