"""What the MPI and job tests share: the allreduce benchmark's files, another MPI's launcher, a
stage-3 rank that aborts, and a stage-3 job submitted as a student does (fixtures:
tests/conftest.py; the rest: tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from course.cluster import submit
from course.contracts import benchmark, joblog, stages
from course.fileio import sha256_file
from course.lessons.step_time import allreduce_report, costmodel


def submit_stage_3(
    folder: Path, quick_env: dict[str, str], train_args: str, **env: str
) -> submit.Job:
    """A 2-rank stage-3 job of the student's `folder` under the kit's local scheduler, on the
    tests' small data set, waited for."""
    with pytest.MonkeyPatch.context() as patch:
        for key in ("CHAINER_DATASET_ROOT", "COURSE_DATASET"):
            patch.setenv(key, quick_env[key])
        job = submit.submit(
            stages.MULTI_NODE.job_path,
            nodes=1,
            per_node=2,
            env={"COURSE_TRAIN_ARGS": train_args, **env},
            scheduler="local",
            workdir=folder,
            echo=None,
        )
        job.wait(timeout=600, echo=None)
    return job


def nsys_job_log(folder: Path) -> str:
    """The log of a 2-rank stage-3 job of `folder` asked for Nsight Systems (PROFILE=nsys) on a
    node without nsys: the job ends, with status 2, before it trains."""
    job = submit.submit(
        stages.MULTI_NODE.job_path,
        nodes=1,
        per_node=2,
        env={"PROFILE": "nsys"},
        scheduler="local",
        workdir=folder,
        echo=None,
    )
    assert job is not None and job.wait(timeout=120, echo=None) == 2
    return job.find_log().read_text(encoding="utf-8")


SIZES = [1024 * 4**k for k in range(1, 9)]  # the benchmark's message sizes, bytes


def measured(
    folder: Path,
    ranks: int = 4,
    algorithm: str = "ring",
    rounds: int = 2,
    seed: int = 0,
    job: str = "7.local",
    started: float = 1.0,
) -> list[allreduce_report.Series]:
    """A benchmark's files as a job leaves them (course.contracts.benchmark.write), with noise, and
    their table."""
    rng = np.random.default_rng(seed)
    run = benchmark.run_folder(folder, job)
    for _ in range(rounds):
        sizes = [
            {
                "bytes": n,
                "repeats": 5,
                "seconds": [
                    costmodel.allreduce_seconds(algorithm, ranks, n, 5e-6, 4e-10)
                    * (1 + 0.2 * rng.random())
                    for _ in range(5)
                ],
            }
            for n in SIZES
        ]
        benchmark.write(
            benchmark.next_path(run, algorithm, ranks),
            {
                "job": {"id": job},
                "ranks": ranks,
                "hosts": ["laptop"] * ranks,
                "cores": 2,
                "algorithm": algorithm,
                "sizes": sizes,
                "started": started,
            },
        )
    return allreduce_report.measured_table(folder)


def check_benchmark_job(folder: Path, ranks: int, log: Path) -> list[allreduce_report.Series]:
    """What every benchmark job leaves, here or under Slurm: a file per burst (2 rounds of ring and
    recursive doubling, in turn), each sealed, named by a log line with its digest, and with the
    algorithm Open MPI was told to use; the reader's table and fits from them."""
    text = log.read_text()
    said = joblog.launches(text)
    assert [launch["slots"] for launch in said] == [ranks] * 4, text
    lines = benchmark.logged(text)
    assert [line["algorithm"] for line in lines] == ["ring", "recursive_doubling"] * 2, text
    for line in lines:
        record = benchmark.load(folder / line["path"])
        assert sha256_file(folder / line["path"]) == line["sha256"]
        assert (record["ranks"], len(record["hosts"])) == (ranks, ranks)
        assert record["mca"]["OMPI_MCA_coll_tuned_allreduce_algorithm"] == str(
            {"ring": 4, "recursive_doubling": 3}[record["algorithm"]]
        )
        assert [size["bytes"] for size in record["sizes"]] == [1024 * 4**k for k in range(1, 9)]
        assert all(size["repeats"] >= 3 and min(size["seconds"]) > 0 for size in record["sizes"])
    table = allreduce_report.measured_table(folder)
    assert [(s.ranks, s.algorithm, s.bursts) for s in table] == [
        (ranks, "recursive_doubling", 2),
        (ranks, "ring", 2),
    ]
    fitted = allreduce_report.fits(table)
    assert set(fitted) == {(ranks, "ring"), (ranks, "recursive_doubling")}
    assert all(beta > 0 for _, beta in fitted.values())
    return table


# --- another MPI's launcher, as the kit's ranks meet it -----------------------------------------

OTHER_MPI = """#!/bin/bash
# Another MPI's mpiexec, as the kit's ranks meet it: it names another MPI, and starts each of its -n
# copies of the program alone (no MPI of its own reaches them: each is an MPI world of one). It
# exits with a failed copy's status, as launchers do.
if [ "$1" = --version ]; then printf 'HYDRA build details:\\n    Version: 3.1.4\\n'; exit 0; fi
n=1
while [ $# -gt 0 ]; do
    case "$1" in
        -n|-np) n=$2; shift 2 ;;
        --hostfile|--bind-to) shift 2 ;;
        *) break ;;
    esac
done
pids=()
for _ in $(seq "$n"); do "$@" & pids+=($!); done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""


def other_mpi_launcher(folder: Path) -> Path:
    """<folder>/other-mpi/bin/mpiexec: a stand-in for another MPI's launcher (OTHER_MPI)."""
    path = folder / "other-mpi" / "bin" / "mpiexec"
    path.parent.mkdir(parents=True)
    path.write_text(OTHER_MPI)
    path.chmod(0o755)
    return path


# A stage-3 rank that raises: ChainerMN's hook (stage 3's scripts add it) calls MPI_Abort.
RANK_ABORTS = """\
import chainermn
from chainermn import global_except_hook

global_except_hook.add_hook()
comm = chainermn.create_communicator("naive")
comm.mpi_comm.barrier()
if comm.rank == 1:
    raise RuntimeError("rank 1 fails on purpose")
comm.mpi_comm.barrier()
"""
