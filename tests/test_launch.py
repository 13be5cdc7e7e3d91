"""`course launch`: from the job's node list to one MPI rank per slot."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from course.cluster import hosts, launch, mpi
from course.contracts import joblog
from course.errors import JobError
from tests.helpers import PYTHON

REEDBUSH = (
    "mpirun --mca btl_openib_want_cuda_gdr 1 --mca mpi_warn_on_fork 0 -np {nprocs} -machinefile "
    "{hostfile} "
    "-npernode {ranks_per_node} {export}"
)


def pbs_job(tmp_path, lines):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{host}\n" for host in lines))
    return hosts.detect(
        {
            "PBS_JOBID": "4242.reedbush-pbsadmin0",
            "PBS_NODEFILE": str(nodefile),
            "PBS_O_WORKDIR": str(tmp_path),
        }
    )


def test_two_nodes_of_two_gpus_become_four_ranks(tmp_path, monkeypatch):
    job = pbs_job(tmp_path, ["a087", "a087", "a088", "a088"])
    hostfile = launch.write_hostfile(job, tmp_path)
    assert hostfile.read_text() == "a087 slots=2\na088 slots=2\n"
    monkeypatch.setenv("PATH", f"{os.path.dirname(PYTHON)}:{os.environ['PATH']}")
    monkeypatch.setenv("COURSE_DATASET", "cifar10_256px_5p")
    argv, extra = launch.build(
        job, ["python", "train.py"], REEDBUSH.replace("mpirun", "mpiexec"), hostfile
    )
    text = " ".join(argv)
    assert (
        "-np 4 -machinefile" in text and "-npernode 2" in text and text.endswith("python train.py")
    )
    assert (
        "-x COURSE_DATASET" in text and "-x PATH" in text
    )  # what the ranks on the other node need
    assert extra["COURSE_RUN_TAG"] == "4242.reedbush-pbsadmin0"
    # What each rank checks its MPI world against (mpi.check_world), on the other node too.
    assert extra[mpi.LAUNCHED_RANKS] == "4" and extra[mpi.LAUNCHER] == argv[0]
    assert f"-x {mpi.LAUNCHED_RANKS}" in text and f"-x {mpi.LAUNCHER}" in text


def test_allreduce_algorithms_go_to_open_mpi(tmp_path):
    job = pbs_job(tmp_path, ["localhost"])
    _, extra = launch.build(
        job, ["true"], "mpiexec -n {nprocs}", tmp_path / "h", allreduce="rabenseifner"
    )
    assert (
        extra["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "6"
        and extra["COURSE_ALLREDUCE"] == "rabenseifner"
    )
    assert (
        extra["OMPI_MCA_coll"] == "^han"
    )  # so that tuned, which takes the algorithm, runs across nodes too
    with pytest.raises(JobError, match="unknown allreduce algorithm"):
        launch.build(job, ["true"], "mpiexec -n {nprocs}", tmp_path / "h", allreduce="butterfly")


def test_a_missing_launcher_or_bad_template_is_explained(tmp_path):
    job = pbs_job(tmp_path, ["localhost"])
    with pytest.raises(JobError, match="is not found") as caught:
        launch.build(job, ["true"], "srun-that-does-not-exist -n {nprocs}", tmp_path / "h")
    assert "module" in caught.value.hint
    with pytest.raises(JobError, match="unknown field"):
        launch.build(job, ["true"], "mpiexec -n {ranks}", tmp_path / "h")


@pytest.mark.parametrize(
    "launched,launcher,size,error",
    [
        ("2", "kit", 2, None),  # one of the ranks course launch started
        (None, None, 1, None),  # not under course launch: nothing to check
        ("2", "/other/bin/mpiexec", 1, "JobError: wrong MPI launcher: /other/bin/mpiexec; "),
        ("2", "kit", 4, "course launch started 2 rank(s), but its launcher's command made an MPI "),
    ],
)
def test_a_rank_checks_its_world_against_the_ranks_course_launch_started(
    launched, launcher, size, error
):
    env = {k: v for k, v in os.environ.items() if k not in (mpi.LAUNCHED_RANKS, mpi.LAUNCHER)}
    if launched:
        env[mpi.LAUNCHED_RANKS] = launched
        env[mpi.LAUNCHER] = mpi.mpiexec() if launcher == "kit" else launcher
    # In a process of its own: mpi4py's library is read there without starting MPI.
    code = f"from course.cluster import mpi; mpi.check_world({size})"
    run = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True)
    if error is None:
        assert run.returncode == 0, run.stderr
    else:
        assert run.returncode == 1 and error in run.stderr, run.stderr


@pytest.mark.integration
def test_real_ranks_start_from_a_fabricated_node_file(tmp_path, mpi_env):
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("localhost\nlocalhost\n")
    env = {
        **mpi_env,
        "PBS_JOBID": "7.local",
        "PBS_NODEFILE": str(nodefile),
        "PBS_O_WORKDIR": str(tmp_path),
        "COURSE_MPIEXEC": "mpiexec -n {nprocs} --hostfile {hostfile} --oversubscribe",
    }
    code = "from mpi4py import MPI; c = MPI.COMM_WORLD; print(f'rank {c.rank} of {c.size}')"
    run = subprocess.run(
        [PYTHON, "-m", "course", "launch", "--", PYTHON, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert sorted(line for line in run.stdout.splitlines() if line.startswith("rank")) == [
        "rank 0 of 2",
        "rank 1 of 2",
    ]
    assert "course launch: job 7.local (pbs); 2 slot(s) on 1 node(s): localhost x2" in run.stdout


@pytest.mark.integration
def test_the_data_set_is_staged_to_node_local_storage_and_the_ranks_read_the_copy(
    tmp_path, mpi_env
):
    shared = tmp_path / "shared"
    (shared / "pfnet" / "chainer" / "cifar").mkdir(parents=True)
    (shared / "pfnet" / "chainer" / "cifar" / "tiny.npz").write_bytes(os.urandom(2**20))
    local = tmp_path / "local"
    local.mkdir()
    env = {
        **mpi_env,
        "CHAINER_DATASET_ROOT": str(shared),
        "COURSE_DATASET": "synthetic",  # the command's --dataset wins
        "TMPDIR": str(local),
        "COURSE_MPIEXEC": "mpiexec -n {nprocs} --hostfile {hostfile} {export}",
    }
    code = (
        "import os, sys; from course.runtime import data; p = data.path_for(sys.argv[2]); "
        "print('rank reads', p, p.stat().st_size)"
    )
    run = subprocess.run(
        [PYTHON, "-m", "course", "launch", "--stage-data", "--", PYTHON, "-c", code]
        + ["--dataset", "tiny"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    [staged] = joblog.staged(run.stdout)
    copy = Path(staged["path"])
    assert staged["name"] == "tiny" and staged["bytes"] == 2**20 and staged["seconds"] >= 0
    assert copy.is_relative_to(local) and copy.name == "tiny.npz"
    assert f"rank reads {copy} {2**20}" in run.stdout
    assert run.stdout.index(staged["path"]) < run.stdout.index(" slot(s) on ")  # before launch
    assert list(local.iterdir()) == []  # the copy went with the launch
