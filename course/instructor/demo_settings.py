"""The demo's quick settings (`python -m course demo` unless --site-settings): the smallest that run
every step of the course, so that make demo stays within 10 minutes on 2 cores. The tests' short
runs use them too.

At these sizes each run lasts seconds and its accuracy stays near chance (measured: 0.06 to 0.20
on 10 classes), so no run reaches the course's accuracy target: the site profile's settings (about
25 minutes on 2 cores) are where the accuracy lessons show. Throughput and scaling still do.
"""

from __future__ import annotations

from course.runtime import data, data_prepare

QUICK_DATASET, QUICK_IMAGES = "small", (1024, 256)  # a synthetic set: training, test images
QUICK_TRAIN_ARGS = "--model vgg --width 8 --batchsize 32 --epoch 2 --warmup 2"
QUICK_SETTINGS = {
    "COURSE_DATASET": QUICK_DATASET,
    "COURSE_TRAIN_ARGS": QUICK_TRAIN_ARGS,
    "ROUNDS": "1",  # the allreduce benchmark: one turn of each algorithm, briefly
    "BUDGET": "0.15",
}


def quick() -> dict[str, str]:
    """The quick settings' environment for kernels and jobs, their data set made first where it is
    missing (in $CHAINER_DATASET_ROOT; the same seed makes the same files)."""
    if not data.path_for(QUICK_DATASET).exists():
        data_prepare.prepare_synthetic(*QUICK_IMAGES, name=QUICK_DATASET)
    return dict(QUICK_SETTINGS)
