"""The course kit: what the notebooks, the job scripts and the tests share.

The package's folders follow a job's path: `runtime` runs inside a job,
`cluster` gets a job script onto nodes, `notebook` is what the notebooks call, `instructor` is
what the instructor runs; the contracts between them (`stages`, `joblog`, `results`, `evidence`)
stand at the top.

``import course`` stays light (no Chainer) so that the command line answers fast; the names a
notebook uses are imported on first use:

    course.Throughput           the images/sec extension (course.runtime.throughput)
    course.models.build(...)    the course's networks (course.runtime.models)
    course.notebook.setup(...), course.notebook.write_script(...)
    course.submit(...)          qsub -j oe, or the local scheduler (course.cluster.submit)
    course.comparison_plan()    the site's stage-3 runs; course.profile_plan(): the profiled ones;
                                course.benchmark_plan(): the allreduce benchmark's
                                (course.cluster.plan)
    course.prediction_args(stage)   what a stage's prediction function is asked for this site's job
    course.report.show()        the table and plots of your runs (course.notebook.report)
    course.profile_report.show()    where a step's time goes, per rank
                                    (course.lessons.step_time.profile_report)
    course.one_node.show()      stage 2 beside stage 3 on one node's GPUs
    (course.lessons.run_part.one_node)
    course.allreduce_report.show()  the allreduce benchmark, fitted and compared
                                    (course.lessons.step_time.allreduce_report)
    course.model_parallel_report.show()  model against data parallelism, time and bytes
                                    (course.lessons.beyond.model_parallel_report)
    course.large_batch_reference.show()  notebook 06's reference runs, once the prediction is
                                    recorded (course.lessons.accuracy.large_batch_reference)
"""

from __future__ import annotations

from course import gpu as _gpu

__version__ = "0.1.0"

# Before anything imports CuPy, so that cuDNN from the gpu extra is found (see course.gpu).
_gpu.preload_cuda_libraries()

_LAZY = {
    "Throughput": ("course.runtime.throughput", "Throughput"),
    "models": ("course.runtime.models", None),
    "notebook": ("course.notebook", None),
    "submit": ("course.cluster.submit", "submit"),
    "comparison_plan": ("course.cluster.plan", "comparison_plan"),
    "profile_plan": ("course.cluster.plan", "profile_plan"),
    "benchmark_plan": ("course.cluster.plan", "benchmark_plan"),
    "prediction_args": ("course.cluster.plan", "prediction_args"),
    "profile_report": ("course.lessons.step_time.profile_report", None),
    "one_node": ("course.lessons.run_part.one_node", None),
    "allreduce_report": ("course.lessons.step_time.allreduce_report", None),
    "model_parallel_report": ("course.lessons.beyond.model_parallel_report", None),
    "large_batch_reference": ("course.lessons.accuracy.large_batch_reference", None),
    "report": ("course.notebook.report", None),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'course' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module
