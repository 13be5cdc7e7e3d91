"""A real OpenPBS cluster for the tests: pbs_server with its PostgreSQL datastore, pbs_sched,
pbs_comm and pbs_mom, on one node `pnode1` (tests/pbs_build.py finds or builds OpenPBS).

pbs_server refuses a loopback address, so the node is a network namespace of its own, joined to
this machine by a veth pair on a private subnet, with a UTS namespace (its host name), a mount
namespace (an /etc/hosts naming the node and this machine, and PBS_HOME on a fixed path outside
any world-writable folder, which PBS's file checks demand) and an IPC namespace (the datastore's
shared memory goes with it). The tests stay in this machine's namespaces as on a login node: their
qsub and qstat reach the server at the node's address (PBS_SERVER_HOST_NAME of the client's
pbs.conf), with PBS's commands first on PATH, ahead of slurm-wlm-torque's qstat. The file system
is shared, as a cluster's home and work folders are.

The namespace's name, the veth pair and PBS_HOME's mount point are fixed, so one cluster runs on
this machine at a time: `start` holds a machine-wide lock for the cluster's life (a second test run
waits its turn), and only then removes what a killed earlier run may have left. `Cluster.stop()`
stops the daemons with PBS's own init script, then kills whatever is left in the node's namespace
(jobs, ranks, the datastore), removes the namespace and the veth pair, and lets the lock go.

`Unavailable` (the tests skip) is only for a machine where the cluster cannot run at all: not root,
no namespaces, no OpenPBS or its packages. Past those checks a failure is `ClusterError`: the tests
fail and say why.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from tests.pbs_build import Unavailable, apt_install, build, installed

if TYPE_CHECKING:
    from course.cluster.submit import Job

__all__ = ["Cluster", "ClusterError", "Unavailable", "leftovers", "start"]

NODE = "pnode1"
NAMESPACE = f"course-pbs-{NODE}"
OUTSIDE = "crs-pbs0"  # this machine's end of the veth pair
SUBNET = "10.213.47"
LOGIN, ADDRESS = f"{SUBNET}.1", f"{SUBNET}.2"
QUEUE = "workq"  # the queue OpenPBS creates
MOUNT_POINT = Path("/var/spool/course-pbs")  # PBS_HOME's parent, inside the node's mount namespace
LOCK = Path(tempfile.gettempdir()) / "course-pbs-cluster.lock"  # held while a cluster runs
LOCK_TIMEOUT = 3600  # seconds to wait for another test run's cluster (its module: about 10 min)
QMGR = (  # one call each: qmgr applies only the last -c
    "set server acl_roots = root@*",  # the tests submit as root
    "set server flatuid = true",  # root@<this machine> is root on the node
    "set server job_history_enable = true",  # qstat -x: finished jobs, for accounting
)


class ClusterError(RuntimeError):
    """The cluster failed to start or stop on a machine that can run it; the message says why."""


def _run(*command: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    run = subprocess.run(command, capture_output=True, text=True, **options)
    if check and run.returncode != 0:
        said = (run.stderr or run.stdout).strip()[-400:]
        raise ClusterError(f"{' '.join(command)} failed: {said}")
    return run


@dataclass
class Cluster:
    folder: Path
    exec_: Path  # PBS_EXEC
    holder: subprocess.Popen | None = None  # the process that holds the node's namespaces
    lock: IO[str] | None = None  # LOCK, open and held while the cluster may run

    @property
    def conf(self) -> Path:
        """The commands' pbs.conf (the daemons have theirs, pbs-node.conf)."""
        return self.folder / "pbs.conf"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` as a student's shell on the login node has it: PBS's commands first on PATH, then
        the kit's environment."""
        bin_dir = Path(sys.executable).parent
        path = f"{self.exec_ / 'bin'}{os.pathsep}{bin_dir}{os.pathsep}{base.get('PATH', '')}"
        return {**base, "PBS_CONF_FILE": str(self.conf), "PATH": path}

    def on_node(self, *command: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """`command` run as root on the node (PBS's manager commands, the init script)."""
        assert self.holder is not None
        return _run(
            "nsenter",
            f"--target={self.holder.pid}",
            "--net",
            "--uts",
            "--mount",
            "--ipc",
            "env",
            f"PBS_CONF_FILE={self.folder / 'pbs-node.conf'}",
            *command,
            timeout=timeout,
        )

    def qmgr(self, command: str) -> None:
        self.on_node(str(self.exec_ / "bin" / "qmgr"), "-c", command)

    def start_qsub(self, folder: Path, base: dict[str, str], *arguments: str) -> Job:
        """`qsub -j oe ARGUMENTS` as a student types it in `folder`; the job, queued."""
        from course.cluster import submit

        run = subprocess.run(
            ["qsub", "-j", "oe", *arguments],
            cwd=folder,
            env=self.env(base),
            capture_output=True,
            text=True,
            check=True,
        )
        return submit.Job(run.stdout.strip(), folder, "qsub")

    def stop(self) -> None:
        if self.holder is not None and self.holder.poll() is None:
            try:
                self.on_node(str(self.exec_ / "libexec" / "pbs_init.d"), "stop", timeout=120)
            except (ClusterError, subprocess.TimeoutExpired):
                pass  # what is left is killed below
        if self.lock is None:
            return  # another run's cluster: not this one's to remove
        try:
            remove_network()
            if self.holder is not None:
                self.holder.wait(timeout=30)
            try:
                MOUNT_POINT.rmdir()  # empty here: PBS_HOME was mounted on it in the node only
            except OSError:
                pass
        finally:
            self.lock.close()  # closing lets the lock go
            self.lock = None


def left_running() -> list[str]:
    """The processes in the node's namespace (empty once the cluster is gone)."""
    return _run("ip", "netns", "pids", NAMESPACE, check=False).stdout.split()


def leftovers(exec_: Path) -> list[str]:
    """What of a cluster is still on this machine: processes, PBS's daemons, the namespace, the veth
    pair, mounts, PBS_HOME's mount point (empty once it has stopped)."""
    found = [f"process {pid} in {NAMESPACE}" for pid in left_running()]
    for pattern in (str(exec_), str(MOUNT_POINT)):  # PBS's daemons; the datastore's postgres
        pids = _run("pgrep", "-f", pattern, check=False).stdout.split()
        found += [f"process {pid} running {pattern}" for pid in pids]
    if NAMESPACE in _run("ip", "netns", "list", check=False).stdout:
        found.append(f"network namespace {NAMESPACE}")
    if _run("ip", "link", "show", OUTSIDE, check=False).returncode == 0:
        found.append(f"link {OUTSIDE}")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        where = line.split()[4]
        if NAMESPACE in where or where.startswith(str(MOUNT_POINT)):
            found.append(f"mount on {where}")
    if MOUNT_POINT.exists():
        found.append(f"folder {MOUNT_POINT}")
    return found


def _take_lock() -> IO[str]:
    """LOCK, held: once another test run's cluster (which holds it) has stopped."""
    lock = LOCK.open("a+")
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.seek(0)
                holder = lock.read().strip()
                lock.close()
                raise ClusterError(
                    f"another test run's PBS cluster ({holder}) has held {LOCK} for "
                    f"{LOCK_TIMEOUT} s; stop that run, or wait for it and run these tests again"
                ) from None
            time.sleep(1)
    lock.truncate(0)
    lock.write(f"pid {os.getpid()}: {' '.join(sys.argv)[:200]}\n")
    lock.flush()
    return lock


def _can_make_namespaces() -> None:
    """Unavailable where this machine refuses the namespaces the node needs (a container without
    the privilege, a kernel without them)."""
    probe = _run("unshare", "--net", "--uts", "--mount", "--ipc", "true", check=False)
    if probe.returncode != 0:
        said = (probe.stderr or probe.stdout).strip()[-300:]
        raise Unavailable(f"this machine makes no network, UTS, mount and IPC namespaces: {said}")


def remove_network() -> None:
    """Kill everything in the node's namespace, remove it and the veth pair (no error for what is
    already gone)."""
    deadline = time.monotonic() + 60
    while pids := left_running():  # a dying daemon may still start a process: until none is left
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                continue
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} in {NAMESPACE} outlived SIGKILL for 60 s")
        time.sleep(0.2)
    _run("ip", "netns", "del", NAMESPACE, check=False)
    _run("ip", "link", "del", OUTSIDE, check=False)


def _create_network(folder: Path) -> Path:
    """The namespace, its veth pair and addresses; returns the node's hosts file."""
    _run("ip", "netns", "add", NAMESPACE)
    _run("ip", "link", "add", OUTSIDE, "type", "veth", "peer", "name", "eth0", "netns", NAMESPACE)
    _run("ip", "addr", "add", f"{LOGIN}/24", "dev", OUTSIDE)
    _run("ip", "link", "set", OUTSIDE, "up")
    for command in (
        ["ip", "addr", "add", f"{ADDRESS}/24", "dev", "eth0"],
        ["ip", "link", "set", "eth0", "up"],
        ["ip", "link", "set", "lo", "up"],
    ):
        _run("ip", "netns", "exec", NAMESPACE, *command)
    hosts = folder / "hosts"
    # This machine (the login node) by its own name: the server names a job's owner by it.
    hosts.write_text(f"127.0.0.1 localhost\n{ADDRESS} {NODE}\n{LOGIN} {os.uname().nodename}\n")
    return hosts


def _write_confs(cluster: Cluster) -> None:
    home = MOUNT_POINT / "home"  # made by pbs_habitat at the first start
    common = f"PBS_SERVER={NODE}\nPBS_EXEC={cluster.exec_}\nPBS_HOME={home}\n"
    (cluster.folder / "pbs-node.conf").write_text(
        common
        + "PBS_START_SERVER=1\nPBS_START_SCHED=1\nPBS_START_COMM=1\nPBS_START_MOM=1\n"
        + "PBS_CORE_LIMIT=unlimited\nPBS_SCP=/usr/bin/scp\n"
    )
    cluster.conf.write_text(common + f"PBS_SERVER_HOST_NAME={ADDRESS}\n")


def _mom_config(cluster: Cluster) -> None:
    """The mom copies a job's log into the submit folder itself (`$usecp`): the folder is shared.
    It checks its jobs' limits every 1 to 5 s, not every 10 to 120 s, so that a test's walltime
    kill comes on time."""
    config = cluster.folder / "root" / "home" / "mom_priv" / "config"
    config.write_text(f"$clienthost {NODE}\n$usecp *:/ /\n$min_check_poll 1\n$max_check_poll 5\n")


def start(folder: Path) -> Cluster:
    """The cluster, its node free; Unavailable (with nothing left running) where it cannot
    start."""
    if os.geteuid() != 0:
        raise Unavailable("the test cluster runs PBS's daemons as root")
    for tool in ("ip", "nsenter", "unshare", "mount", "pgrep"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} is not installed: the PBS node needs it for its namespaces")
    _can_make_namespaces()
    exec_ = installed() or build()
    apt_install(["postgresql"])
    cluster = Cluster(folder, exec_)
    cluster.lock = _take_lock()
    try:
        return _start(cluster)
    except BaseException:
        cluster.stop()
        raise


def _start(cluster: Cluster) -> Cluster:
    folder = cluster.folder
    folder.mkdir(parents=True, exist_ok=True)
    remove_network()  # what a killed earlier run left (a live one would hold the lock)
    try:
        hosts = _create_network(folder)
    except ClusterError as e:
        raise ClusterError(f"cannot make the node's network namespace: {e}") from None
    root = folder / "root"
    root.mkdir(mode=0o755)
    root.chmod(0o755)  # whatever the umask: PBS refuses a PBS_HOME others may write to
    MOUNT_POINT.mkdir(mode=0o755, parents=True, exist_ok=True)
    _write_confs(cluster)
    cluster.holder = subprocess.Popen(
        [
            "nsenter",
            f"--net=/run/netns/{NAMESPACE}",
            "unshare",
            "--uts",
            "--mount",
            "--ipc",
            "sh",
            "-c",
            f"hostname {NODE} && mount --bind {hosts} /etc/hosts && "
            f"mount --bind {root} {MOUNT_POINT} && echo ready && exec sleep infinity",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cluster.holder.stdout is not None
    if cluster.holder.stdout.readline().strip() != "ready":
        raise ClusterError(f"cannot make the node's namespaces: {cluster.holder.stderr.read()}")
    init = str(cluster.exec_ / "libexec" / "pbs_init.d")
    try:  # PBS_HOME and its datastore first, so that the mom's config is in place when it starts
        cluster.on_node(str(cluster.exec_ / "libexec" / "pbs_habitat"))
        _mom_config(cluster)
        cluster.on_node(init, "start")
    except ClusterError as e:
        raise ClusterError(f"PBS did not start: {e}; its logs are in {root}/home/*_logs") from None
    for setting in QMGR:
        cluster.qmgr(setting)
    nodes = cluster.on_node(str(cluster.exec_ / "bin" / "pbsnodes"), "-a").stdout
    if NODE not in nodes:
        cluster.qmgr(f"create node {NODE}")
    deadline = time.monotonic() + 120
    state = ""
    while time.monotonic() < deadline:
        pbsnodes = str(cluster.exec_ / "bin" / "pbsnodes")
        state = _run(pbsnodes, NODE, env=cluster.env(dict(os.environ)), check=False).stdout
        if "state = free" in state:
            return cluster
        time.sleep(1)
    raise ClusterError(f"node {NODE} did not become free (pbsnodes says {state!r}); see {root}")


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


def assignment(student_run: Path, folder: Path, env: dict[str, str]) -> Path:
    """A copy of the solved assignment without its job outputs, its job scripts set up with
    reedbush_profile."""
    from course.cluster import sites

    shutil.copytree(student_run, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    profile = reedbush_profile(folder.parent / "reedbush-h-here.toml", env)
    sites.apply(sites.load_profile(str(profile)), folder / "jobs")
    return folder
