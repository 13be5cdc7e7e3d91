"""Real training runs on CPU: one device, two MPI ranks, and what happens when training fails."""

from __future__ import annotations

import argparse
import re
import subprocess
import time

import chainer
import chainer.links as L
import numpy as np
import pytest
from chainer import training

from course.contracts import results
from course.errors import CourseError
from course.paths import find_program
from course.runtime import checkpoint, data_prepare, harness
from course.runtime.throughput import Throughput
from tests.helpers import PYTHON

pytestmark = pytest.mark.slow


def summary(stdout: str) -> tuple[float, str, str]:
    """(images/sec, results path, sha256) from the lines a run prints."""
    rate = float(re.search(r"^Throughput: ([\d.]+) \[images/sec\.\]", stdout, re.M).group(1))
    path, digest = re.search(
        r"^course: results (\S+) sha256=([0-9a-f]{64})$", stdout, re.M
    ).groups()
    return rate, path, digest


def train_on_cpu(folder, *flags) -> str:
    """What `python -m course train --device @numpy FLAGS` prints, run in `folder`."""
    return subprocess.run(
        [PYTHON, "-m", "course", "train", "--device", "@numpy", *flags],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_one_cpu_device_learns_the_synthetic_set(tmp_path, data_root):
    data_prepare.prepare_synthetic(3000, 500)
    out = train_on_cpu(tmp_path, "--width", "16", "--epoch", "2", "--batchsize", "64")
    rate, path, digest = summary(out)
    record = results.load(tmp_path / path)  # valid against results.RECORD_SCHEMA
    # The harness writes every field the schema declares, optional or not (profile: --profile only).
    assert set(record) - {"_path"} == set(results.RECORD_SCHEMA["properties"]) - {"profile"}
    assert record["complete"] and record["error"] is None
    assert (record["workers"], record["devices"], record["device_kind"]) == (1, ["@numpy"], "cpu")
    assert record["dataset"] == {"name": "synthetic", "train_per_worker": 3000}
    model = dict(record["model"])
    arrays = model.pop("arrays")  # the parameter arrays' sizes, for the allreduce cost model
    weights = model.pop("weights_sha256")  # the trained weights, once the snapshots are gone
    assert model == {"name": "vgg", "width": 16, "parameters": 939_770} and sum(arrays) == 939_770
    assert isinstance(weights, str) and len(weights) == 64
    assert not checkpoint.snapshot_files((tmp_path / path).parent)  # a finished run keeps none
    assert round(record["throughput"]["images_per_sec"], 2) == rate > 0
    assert results.seal_ok(record)
    from course.fileio import sha256_file

    assert sha256_file(tmp_path / path) == digest
    # Ten classes: chance is 0.1. Two CPU epochs must clearly beat it.
    accuracy = record["log"][-1]["validation/main/accuracy"]
    assert accuracy > 0.3, f"validation accuracy {accuracy:.3f} after 2 epochs"
    assert [entry["epoch"] for entry in record["log"]] == [1, 2]


def _train_log(folder, *flags) -> tuple[int, list[tuple[float, float]]]:
    """(seed, [(training loss, validation accuracy) per epoch]) of a short reference run."""
    folder.mkdir()
    out = train_on_cpu(
        folder, "--width", "4", "--epoch", "2", "--batchsize", "32", "--warmup", "1", *flags
    )
    _, path, _ = summary(out)
    record = results.load(folder / path)
    return record["seed"], [(e["main/loss"], e["validation/main/accuracy"]) for e in record["log"]]


def test_the_same_seed_gives_the_same_run_and_another_seed_another(tmp_path, data_root):
    data_prepare.prepare_synthetic(512, 128)
    seed, first = _train_log(tmp_path / "a", "--seed", "3")
    assert seed == 3 and len(first) == 2
    assert _train_log(tmp_path / "b", "--seed", "3") == (3, first), (
        "same seed, same loss and accuracy per epoch"
    )
    assert _train_log(tmp_path / "c", "--seed", "4")[1] != first


def test_two_mpi_ranks_with_the_naive_communicator(tmp_path, data_root, mpi_env):
    data_prepare.prepare_synthetic(1280, 256)
    mpiexec = find_program("mpiexec", environment_first=True)
    # --no-gpu: on a GPU node `auto` would give each rank a GPU, and naive would hand GPU memory to
    # this MPI.
    out = subprocess.run(
        [
            mpiexec,
            "-n",
            "2",
            PYTHON,
            "-m",
            "course",
            "train",
            "--communicator",
            "naive",
            "--no-gpu",
            "--width",
            "8",
            "--epoch",
            "1",
            "--batchsize",
            "32",
            "--warmup",
            "2",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env=mpi_env,
        timeout=300,
    ).stdout
    assert out.count("Throughput:") == 1, "only rank 0 reports"
    rate, path, _ = summary(out)
    record = results.load(tmp_path / path)
    assert (record["workers"], record["communicator"], record["updater"]) == (
        2,
        "naive",
        "StandardUpdater",
    )
    assert len(record["hosts"]) == 2 and record["devices"] == ["@numpy", "@numpy"]
    assert record["batch_size"] == {"per_worker": 32, "total": 64}
    assert record["dataset"]["train_per_worker"] == 640  # scatter_dataset gave each rank half
    assert record["throughput"]["images_per_iteration"] == 64
    assert record["versions"]["mpi"].startswith("Open MPI")
    assert len(list((tmp_path / "runs").iterdir())) == 1, "all ranks write under rank 0's folder"


def test_an_exception_on_one_rank_ends_the_whole_job(tmp_path, mpi_env):
    script = tmp_path / "broken.py"
    script.write_text(
        "import time\n"
        "from course.runtime import harness\n"
        "harness.parse_args('multi_node', [])\n"
        "import chainermn\n"
        "comm = chainermn.create_communicator('naive')\n"
        "if comm.rank == 1:\n"
        "    raise ValueError('a student mistake on rank 1')\n"
        "comm.mpi_comm.Barrier()  # rank 0 would wait here forever without the abort hook\n"
    )
    started = time.monotonic()
    mpiexec = find_program("mpiexec", environment_first=True)
    run = subprocess.run(
        [mpiexec, "-n", "2", PYTHON, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=mpi_env,
        timeout=120,
    )
    assert run.returncode != 0
    assert "a student mistake on rank 1" in run.stderr
    assert time.monotonic() - started < 60


def _tiny_trainer(out, fail_at_epoch=None, optimizer=None):
    rng = np.random.default_rng(0)
    dataset = chainer.datasets.TupleDataset(
        rng.normal(size=(40, 4)).astype(np.float32), rng.integers(0, 3, 40).astype(np.int32)
    )
    model = L.Classifier(L.Linear(4, 3))
    optimizer = optimizer or chainer.optimizers.SGD(0.1)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(dataset, 10)
    trainer = training.Trainer(
        training.updaters.StandardUpdater(iterator, optimizer), (3, "epoch"), out=str(out)
    )
    trainer.extend(Throughput(10, warmup=1))

    @training.make_extension(trigger=(1, "epoch"))
    def mistake(trainer):
        if trainer.updater.epoch == fail_at_epoch:
            raise ZeroDivisionError("division by zero in the student's extension")

    trainer.extend(mistake)
    return trainer


def _args(**overrides):
    defaults = dict(
        stage="single_gpu",
        batchsize=10,
        warmup=1,
        model="linear",
        width=0,
        dataset="fixture",
        epoch=3,
        resume=True,
    )
    return argparse.Namespace(**{**defaults, **overrides})


def test_a_failed_run_still_leaves_its_partial_results(tmp_path, capsys):
    trainer = _tiny_trainer(tmp_path / "run", fail_at_epoch=2)
    with pytest.raises(ZeroDivisionError):
        harness.run(trainer, _args())
    record = results.load(tmp_path / "run" / "results.json")
    assert record["complete"] is False
    assert record["error"] == "ZeroDivisionError: division by zero in the student's extension"
    assert [entry["epoch"] for entry in record["log"]] == [1]  # written at the end of epoch 1


@pytest.mark.parametrize(
    "optimizer, lr, shown",
    [
        (chainer.optimizers.Adam(alpha=0.002), 0.002, "lr 0.002"),
        (chainer.optimizers.AdaDelta(), None, "lr n/a"),
    ],
)
def test_any_chainer_optimizer_is_recorded(tmp_path, capsys, optimizer, lr, shown):
    harness.run(_tiny_trainer(tmp_path / "run", optimizer=optimizer), _args())
    assert f"| {shown}" in capsys.readouterr().out
    record = results.load(tmp_path / "run" / "results.json")
    assert record["complete"] and record["learning_rate"] == lr
    assert record["optimizer"] == {"name": type(optimizer).__name__, "lr": lr}


def test_a_trainer_without_throughput_is_refused_with_the_fix(tmp_path):
    trainer = _tiny_trainer(tmp_path / "run")
    trainer._extensions.pop("Throughput")
    with pytest.raises(CourseError) as caught:
        harness.run(trainer, _args())
    assert "course.Throughput" in caught.value.hint


def test_summary_lines_match_the_results_file(tmp_path, capsys):
    harness.run(_tiny_trainer(tmp_path / "run"), _args())
    rate, path, digest = summary(capsys.readouterr().out)
    record = results.load(path)
    assert round(record["throughput"]["images_per_sec"], 2) == rate
    assert record["complete"] and record["log"][-1]["epoch"] == 3
