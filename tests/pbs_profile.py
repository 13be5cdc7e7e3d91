"""The kit's `reedbush-h` profile as the test PBS cluster (tests/pbs_cluster.py) needs it, and the
solved assignment's job scripts set up with it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tests.pbs_cluster import QUEUE


def reedbush_profile(path: Path, env: dict[str, str]) -> Path:
    """sites/reedbush-h.toml for this cluster, written to `path`: its queue, group and MPI lines
    changed to this cluster's (one node, no InfiniBand), and, as this machine has no modules,
    conda, /lustre or GPU, its environment lines to the kit's Python environment and the quick
    settings of `env`."""
    text = (Path(__file__).resolve().parent.parent / "sites" / "reedbush-h.toml").read_text()
    venv = Path(sys.executable).parent.parent
    changes = {
        'queue = "h-regular"': f'queue = "{QUEUE}"',
        'other_queues = ["h-tutorial", "h-short"]': "other_queues = []",
        'group = "gt00"': 'group = "root"',
        '"module load cuda/12.4 openmpi/4.1.6",\n': "",
        '"source /lustre/gt00/share/course/miniconda3/etc/profile.d/conda.sh",\n': "",
        '"conda activate chainer-course",': f'"source {venv}/bin/activate",',
        'dataset = "cifar10_256px_5p"': f'dataset = "{env["COURSE_DATASET"]}"',
        'dataset_root = "/lustre/gt00/share/course/dataset"': (
            f'dataset_root = "{env["CHAINER_DATASET_ROOT"]}"'
        ),
        'train_args = "--model vgg --width 64 --batchsize 32 --epoch 4"': (
            f'train_args = "{env["COURSE_TRAIN_ARGS"]}"'
        ),
        "threads_per_rank = 4": "threads_per_rank = 1",
        "--mca btl_openib_want_cuda_gdr 1 ": "",
        "[jobs.run_multi_node_training]\nnodes = 2": "[jobs.run_multi_node_training]\nnodes = 1",
    }
    for old, new in changes.items():
        assert old in text, f"sites/reedbush-h.toml no longer has {old!r}: update this test"
        text = text.replace(old, new, 1)
    path.write_text(text)
    return path


def assignment(solved: Path, folder: Path, env: dict[str, str]) -> Path:
    """A copy of the solved assignment without its job outputs, its job scripts set up with
    reedbush_profile."""
    from course.cluster import sites

    shutil.copytree(solved, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    profile = reedbush_profile(folder.parent / "reedbush-h-here.toml", env)
    sites.apply(sites.load_profile(str(profile)), folder / "jobs")
    return folder
