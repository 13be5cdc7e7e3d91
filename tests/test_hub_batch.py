"""Students' servers as batch jobs: the kit's hub with batchspawner's SlurmSpawner
(jupyterhub/batchspawner_config.py) on the two-node test cluster (tests/slurm_cluster.py), as at a
centre whose Jupyter portal runs JupyterLab on compute nodes.

The hub, its proxy and the controller stay on this machine (the login node), the hub's API on the
cluster's bridge; a student's server is a Slurm job on cnode1 or cnode2 (other network, UTS and
mount namespaces, the same file system and users), reached by the node's name. From a kernel there
the student submits a course job with course.submit (the slurm-cpu profile's `qsub -j oe`), which
Slurm records as submitted from that node. Stopped and started again at once, the server is a new
job; stopping it cancels its job; stopping the hub and the cluster leaves nothing running.

Needs root, npm, JupyterHub and batchspawner (the hub extra), and what the two-node cluster needs;
skipped with the reason otherwise.
"""

from __future__ import annotations

import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from course.cluster import sites
from course.contracts import jobend, joblog
from course.instructor import hub
from tests import hub_server, slurm_cluster
from tests.helpers import ROOT, until
from tests.hub_server import A, Hub, run_cell, start_server

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
NODES = ("cnode1", "cnode2")
# batchspawner's start_timeout (a job waits in the queue, 300 s) and the kit's http_timeout (120 s)
SERVER_TIMEOUT = 420
JOB_TIMEOUT = 300  # seconds for the allreduce job on a loaded machine (about 10 s measured)


@dataclass
class Portal:
    """The hub whose servers are Slurm jobs, and the cluster they run on."""

    hub: Hub
    cluster: slurm_cluster.Cluster

    def slurm(self, *command: str) -> str:
        run = subprocess.run(
            command, env=self.cluster.env({"PATH": "/usr/bin:/bin"}), capture_output=True, text=True
        )
        assert run.returncode == 0, f"{' '.join(command)}: {run.stderr}"
        return run.stdout

    def jobs_of(self, user: str) -> list[list[str]]:
        """[job id, name, state, node] of each job of `user` squeue knows."""
        said = self.slurm("squeue", "-h", "-u", user, "-o", "%i %j %T %N")
        return [line.split() for line in said.splitlines()]


def _on_node(cluster: slurm_cluster.Cluster, node: str, *command: str) -> str:
    """`command`, run as root in the node's namespaces (those of its slurmd)."""
    pid = (cluster.folder / f"slurmd-{node}.pid").read_text().strip()
    run = subprocess.run(
        ["nsenter", f"--target={pid}", "--mount", "--uts", "--net", *command],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, f"{' '.join(command)} on {node}: {run.stderr}"
    return run.stdout


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    hub_server.require()
    try:
        import batchspawner  # noqa: F401
    except ImportError:
        pytest.skip('needs batchspawner: make venv (the "hub" extra)')
    # The users' own sbatch, squeue and qsub read slurm.conf: a folder every user can read.
    folder = Path(tempfile.mkdtemp(prefix="course-portal-"))
    folder.chmod(0o755)
    try:
        cluster = slurm_cluster.start(folder / "slurm", nodes=2)
    except slurm_cluster.Unavailable as e:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"no two-node Slurm cluster here: {e}")
    try:
        # Each node runs this Python as the users do (a site installs it where every user can).
        shown = hub_server.show_interpreter(cluster.folder)
        for node in NODES:
            if shown:
                _on_node(cluster, node, "sh", "-ec", " && ".join(shown))
        settings = {
            "SLURM_CONF": str(cluster.conf),
            hub.HUB_IP: slurm_cluster.CONTROLLER,
            hub.PARTITION: slurm_cluster.PARTITION,
            hub.WALLTIME: "1:00:00",
        }
        config = ROOT / "jupyterhub" / "batchspawner_config.py"
        # The hub's host resolves the nodes' names, as a login node does: the cluster's hosts file.
        with hub_server.running(config, 1, settings, cluster.folder / "hosts") as running:
            yield Portal(running, cluster)
        # The hub stopped each server on its way out: their jobs leave the queue.
        until(
            lambda: Portal(running, cluster).slurm("squeue", "-h") == "",
            timeout=60,
            what="the queue emptying once the hub stopped",
            every=1,
        )
    finally:
        cluster.stop()
        try:  # slurmctld saves its state as it stops: its folder goes after it
            daemons = ["pgrep", "-f", str(cluster.conf)]
            until(
                lambda: subprocess.run(daemons, capture_output=True).returncode,
                timeout=30,
                what="the cluster's daemons ending",
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "course-cnode" not in listed
    bridge = subprocess.run(["ip", "link", "show", slurm_cluster.BRIDGE], capture_output=True)
    assert bridge.returncode != 0, "the cluster's bridge outlived it"
    assert not folder.exists()


def test_the_hubs_users_are_the_nodes_users(portal: Portal):
    """useradd on this machine suffices: the nodes share its /etc (only /etc/hosts is theirs)."""
    for user in (portal.hub.instructor, *portal.hub.students):
        uid = str(pwd.getpwnam(user).pw_uid)
        for node in NODES:
            assert _on_node(portal.cluster, node, "id", "-u", user).strip() == uid


def test_a_students_server_is_a_slurm_job_on_a_compute_node(portal: Portal):
    h, student = portal.hub, portal.hub.students[0]
    server = start_server(h, student, timeout=SERVER_TIMEOUT)
    [[job, name, state, node]] = portal.jobs_of(student)
    assert (name, state) == ("spawner-jupyterhub", "RUNNING") and node in NODES
    assert server["ready"]
    cell = "import getpass, os, socket\n"
    cell += "print(socket.gethostname(), getpass.getuser(), os.environ['SLURM_JOB_ID'])\n"
    assert run_cell(h, student, cell).split() == [node, student, job], "the kernel runs in the job"
    assert (h.home(student) / f"jupyterhub_slurmspawner_{job}.log").is_file(), "the job's log"


def test_a_student_submits_a_course_job_from_the_compute_node(portal: Portal):
    h, student = portal.hub, portal.hub.students[0]
    start_server(h, student, timeout=SERVER_TIMEOUT)
    [[_, _, _, server_node]] = portal.jobs_of(student)
    # The assignment as the instructor releases it at this site: the slurm-cpu profile applied.
    folder = h.home(student) / A
    shutil.copytree(ROOT / "notebooks" / A, folder)
    sites.apply(sites.load_profile(str(ROOT / "sites" / "slurm-cpu.toml")), folder / "jobs")
    subprocess.run(["chown", "-R", f"{student}:{student}", str(folder)], check=True)

    cell = hub_server.SUBMIT_CELL.format(folder=f"~/{A}", timeout=JOB_TIMEOUT)
    started = time.monotonic()
    printed = run_cell(h, student, cell, timeout=JOB_TIMEOUT + 60)
    print(f"the job from the node's kernel: {time.monotonic() - started:.1f} s")  # shown with -s
    scheduler, number, status, host, session = printed.splitlines()[0].split()
    assert (scheduler, status, host) == ("qsub", "0", server_node), printed
    [log] = folder.glob(f"run_allreduce_benchmark.sh.o{number}")
    text = log.read_text()
    assert jobend.exit_status(text) == 0, text
    [launch] = joblog.launches(text)
    assert (launch["slots"], launch["nodes"]) == (2, 1), text
    assert re.search(r"on 1 node\(s\): cnode[12] x2", text), text
    [result] = (folder / "runs").glob(f"allreduce-{number}*/*.json")
    assert result.stat().st_uid == pwd.getpwnam(student).pw_uid, "the job ran as the student"
    # Slurm keeps an ended job a while: it was submitted from the kernel's session. (AllocNode's
    # host is the munge daemon's, this machine's, which the nodes share here.)
    shown = portal.slurm("scontrol", "show", "job", number)
    assert re.search(rf"AllocNode:Sid=\S+:{session}\b", shown), shown
    assert re.search(rf"UserId={student}\(", shown), shown


def test_a_server_stopped_and_started_at_once_is_a_new_job(portal: Portal):
    """The student's Stop My Server then Start My Server at once (their ~/.ipython made by the
    first server: issue 25's failure): a new job answers on a node and the old one leaves the
    queue. Should the old job take longer to end than the hub waits for a stop (10 s), the hub
    refuses the start as pending stop, and the student starts once the stop has finished."""
    h, student = portal.hub, portal.hub.students[0]
    start_server(h, student, timeout=SERVER_TIMEOUT)
    [[old, *_]] = portal.jobs_of(student)
    started = time.monotonic()
    status, answer = h.request("DELETE", f"/hub/api/users/{student}/server", student)
    assert status in (202, 204), f"stopping {student}'s server: {status} {answer}"
    status, answer = h.request("POST", f"/hub/api/users/{student}/server", student)
    print(f"start at once: {status} {answer}")  # shown with -s
    if status == 400:
        assert "is pending stop" in str(answer), answer
        until(
            lambda: h.ok("GET", f"/hub/api/users/{student}", student)["pending"] is None,  # type: ignore[index]
            timeout=SERVER_TIMEOUT,
            what=f"the hub finishing {student}'s stop",
            every=0.5,
        )
    else:
        assert status in (201, 202), f"starting {student}'s server again: {status} {answer}"
    assert start_server(h, student, timeout=SERVER_TIMEOUT)["ready"]
    until(
        lambda: old not in [job for job, *_ in portal.jobs_of(student)],
        timeout=60,
        what=f"the old job {old} leaving the queue",
        every=1,
    )
    [[new, name, state, node]] = portal.jobs_of(student)
    assert new != old and (name, state) == ("spawner-jupyterhub", "RUNNING") and node in NODES
    cell = "import os, socket\nprint(socket.gethostname(), os.environ['SLURM_JOB_ID'])\n"
    assert run_cell(h, student, cell).split() == [node, new], "the kernel runs in the new job"
    print(f"stopped and started again: {time.monotonic() - started:.1f} s")


def test_stopping_a_server_cancels_its_job(portal: Portal):
    h, student = portal.hub, portal.hub.students[0]
    start_server(h, student, timeout=SERVER_TIMEOUT)
    assert portal.jobs_of(student)
    status, answer = h.request("DELETE", f"/hub/api/users/{student}/server", student)
    assert status in (202, 204), f"stopping {student}'s server: {status} {answer}"
    until(lambda: not portal.jobs_of(student), timeout=60, what="the server's job ending", every=1)
    until(
        lambda: not hub_server.processes_of([student]),
        timeout=60,
        what=f"{student}'s processes on the node ending",
        every=1,
    )
