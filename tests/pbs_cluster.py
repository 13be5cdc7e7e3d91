"""A real OpenPBS cluster for the tests: pbs_server with its PostgreSQL datastore, pbs_sched,
pbs_comm and pbs_mom on node `pnode1`, and with `start(folder, nodes=2)` a second pbs_mom on
`pnode2` (tests/pbs_build.py finds or builds OpenPBS; tests/pbs_ssh.py lets Open MPI's launcher
reach the second node).

pbs_server refuses a loopback address, so each node is a network namespace of its own, joined to
this machine and the other node by a bridge on a private subnet, with a UTS namespace (its host
name), a mount namespace (an /etc/hosts naming the nodes and this machine, and PBS_HOME, the
node's own, on a fixed path outside any world-writable folder, which PBS's file checks demand) and
an IPC namespace (the datastore's shared memory goes with it). The tests stay in this machine's
namespaces as on a login node: their qsub and qstat reach the server at the first node's address
(PBS_SERVER_HOST_NAME of the client's pbs.conf), with PBS's commands first on PATH, ahead of
slurm-wlm-torque's qstat. The file system is shared, as a cluster's home and work folders are.

The namespaces' names, the bridge and PBS_HOME's mount point are fixed, so one cluster runs on this
machine at a time: `start` holds a machine-wide lock for the cluster's life (a second test run waits
its turn), and only then removes what a killed earlier run may have left. `Cluster.stop()` stops the
daemons with PBS's own init script, then kills whatever is left in the nodes' namespaces (jobs,
ranks, sshd, the datastore), removes the namespaces, the bridge and the ssh keys, and lets the lock
go.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from tests import pbs_ssh
from tests.pbs_build import Unavailable, apt_install, build, installed

if TYPE_CHECKING:
    from course.cluster.submit import Job

__all__ = ["Cluster", "ClusterError", "Unavailable", "leftovers", "start"]

NODES = ("pnode1", "pnode2")  # the first runs the server, scheduler, comm and datastore too
NODE = NODES[0]
BRIDGE = "crs-pbsbr0"  # this machine's end of the nodes' network
SUBNET = "10.213.47"  # on no other network: the namespaces have no route beyond it
LOGIN, ADDRESS = f"{SUBNET}.1", f"{SUBNET}.2"  # this machine's and the server's addresses
QUEUE = "workq"  # the queue OpenPBS creates
MOUNT_POINT = Path("/var/spool/course-pbs")  # PBS_HOME's parent, inside the node's mount namespace
LOCK = Path(tempfile.gettempdir()) / "course-pbs-cluster.lock"  # held while a cluster runs
LOCK_TIMEOUT = 3600  # seconds to wait for another test run's cluster (its module: about 10 min)
QMGR = (  # one call each: qmgr applies only the last -c
    "set server acl_roots = root@*",  # the tests submit as root
    "set server flatuid = true",  # root@<this machine> is root on the node
    "set server job_history_enable = true",  # qstat -x: finished jobs, for accounting
    # Nodes are allocated whole, as on Reedbush-H: select=2 is two nodes, not two chunks of one.
    "set server resources_default.place = scatter:excl",
)


def namespace(node: str) -> str:
    return f"course-pbs-{node}"


class ClusterError(RuntimeError):
    """The cluster failed to start or stop on a machine that can run it; the message says why."""


def _run(*command: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    run = subprocess.run(command, capture_output=True, text=True, **options)
    if check and run.returncode != 0:
        # both: pbs_habitat says on stderr only that PBS_HOME is new, and why it failed on stdout
        said = "\n".join(part.strip()[-400:] for part in (run.stderr, run.stdout) if part.strip())
        raise ClusterError(f"{' '.join(command)} failed: {said}")
    return run


@dataclass
class Cluster:
    folder: Path
    exec_: Path  # PBS_EXEC
    nodes: tuple[str, ...] = (NODE,)
    holders: dict[str, subprocess.Popen] = field(default_factory=dict)  # each holds a node's
    lock: IO[str] | None = None  # LOCK, open and held while the cluster may run
    ssh: str = ""  # why Open MPI cannot reach the other node over ssh; "" where it can

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

    def on_node(
        self, *command: str, node: str = NODE, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        """`command` run as root on `node` (PBS's manager commands, the init script)."""
        return _run(
            "nsenter",
            f"--target={self.holders[node].pid}",
            "--net",
            "--uts",
            "--mount",
            "--ipc",
            "env",
            f"PBS_CONF_FILE={self.folder / f'pbs-{node}.conf'}",
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
        for node in reversed(self.nodes):  # the moms before the server
            if node in self.holders and self.holders[node].poll() is None:
                try:
                    init = str(self.exec_ / "libexec" / "pbs_init.d")
                    self.on_node(init, "stop", node=node, timeout=120)
                except (ClusterError, subprocess.TimeoutExpired):
                    pass  # what is left is killed below
        if self.lock is None:
            return  # another run's cluster: not this one's to remove
        try:
            remove_network()  # sshd too: it runs in the nodes' namespaces
            pbs_ssh.remove(self.folder)
            for holder in self.holders.values():
                holder.wait(timeout=30)
            try:
                MOUNT_POINT.rmdir()  # empty here: PBS_HOME was mounted on it in the node only
            except OSError:
                pass
        finally:
            self.lock.close()  # closing lets the lock go
            self.lock = None


def left_running(node: str) -> list[str]:
    """The processes in the node's namespace (empty once the cluster is gone)."""
    return _run("ip", "netns", "pids", namespace(node), check=False).stdout.split()


def leftovers(cluster: Cluster) -> list[str]:
    """What of a cluster is still on this machine: processes (PBS's daemons, sshd), the namespaces,
    the bridge and its links, mounts, PBS_HOME's mount point, the ssh keys (none once it has
    stopped)."""
    found = [f"process {pid} in {namespace(node)}" for node in NODES for pid in left_running(node)]
    # PBS's daemons; the datastore's postgres; the nodes' sshd
    for pattern in (str(cluster.exec_), str(MOUNT_POINT), pbs_ssh.MARK):
        pids = _run("pgrep", "-f", pattern, check=False).stdout.split()
        found += [f"process {pid} running {pattern}" for pid in pids]
    namespaces = _run("ip", "netns", "list", check=False).stdout.split()
    found += [
        f"network namespace {namespace(node)}" for node in NODES if namespace(node) in namespaces
    ]
    for link in (BRIDGE, *(_outside(node) for node in NODES)):
        if _run("ip", "link", "show", link, check=False).returncode == 0:
            found.append(f"link {link}")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        where = line.split()[4]
        if "course-pbs-" in where or where.startswith(str(MOUNT_POINT)):
            found.append(f"mount on {where}")
    if MOUNT_POINT.exists():
        found.append(f"folder {MOUNT_POINT}")
    found += [f"ssh file {path}" for path in pbs_ssh.files(cluster.folder)]
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
    """Kill everything in the nodes' namespaces, remove them and the bridge (no error for what is
    already gone)."""
    deadline = time.monotonic() + 60
    for node in NODES:
        while pids := left_running(node):  # a dying daemon may start a process: until none is left
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    continue
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"processes {pids} in {namespace(node)} outlived SIGKILL for 60 s"
                )
            time.sleep(0.2)
        _run("ip", "netns", "del", namespace(node), check=False)
        _run("ip", "link", "del", _outside(node), check=False)
    _run("ip", "link", "del", BRIDGE, check=False)


def _outside(node: str) -> str:
    """This machine's end of the node's veth pair, on the bridge."""
    return f"crs-{node}"


def address(node: str) -> str:
    return f"{SUBNET}.{NODES.index(node) + 2}"


def _create_network(folder: Path, nodes: tuple[str, ...]) -> Path:
    """The bridge, the nodes' namespaces with their veth pairs and addresses; returns the nodes'
    hosts file."""
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{LOGIN}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    for node in nodes:
        space, outside = namespace(node), _outside(node)
        _run("ip", "netns", "add", space)
        _run("ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", space)
        _run("ip", "link", "set", outside, "master", BRIDGE, "up")
        for command in (
            ["ip", "addr", "add", f"{address(node)}/24", "dev", "eth0"],
            ["ip", "link", "set", "eth0", "up"],
            ["ip", "link", "set", "lo", "up"],
        ):
            _run("ip", "netns", "exec", space, *command)
    hosts = folder / "hosts"
    # This machine (the login node) by its own name: the server names a job's owner by it.
    names = "".join(f"{address(node)} {node}\n" for node in nodes)
    hosts.write_text(f"127.0.0.1 localhost\n{names}{LOGIN} {os.uname().nodename}\n")
    return hosts


def _write_confs(cluster: Cluster) -> None:
    home = MOUNT_POINT / "home"  # made by pbs_habitat at the first start
    common = f"PBS_SERVER={NODE}\nPBS_EXEC={cluster.exec_}\nPBS_HOME={home}\n"
    for node in cluster.nodes:
        server = int(node == NODE)  # the other node runs a mom alone
        (cluster.folder / f"pbs-{node}.conf").write_text(
            common
            + f"PBS_START_SERVER={server}\nPBS_START_SCHED={server}\nPBS_START_COMM={server}\n"
            + "PBS_START_MOM=1\nPBS_CORE_LIMIT=unlimited\nPBS_SCP=/usr/bin/scp\n"
        )
    cluster.conf.write_text(common + f"PBS_SERVER_HOST_NAME={ADDRESS}\n")


def _mom_config(cluster: Cluster, node: str) -> None:
    """The mom copies a job's log into the submit folder itself (`$usecp`): the folder is shared.
    It checks its jobs' limits every 1 to 5 s, not every 10 to 120 s, so that a test's walltime
    kill comes on time."""
    config = cluster.folder / node / "home" / "mom_priv" / "config"
    config.write_text(f"$clienthost {NODE}\n$usecp *:/ /\n$min_check_poll 1\n$max_check_poll 5\n")


def start(folder: Path, nodes: int = 1) -> Cluster:
    """The cluster with `nodes` (1 or 2) moms, free; Unavailable (with nothing left running) where
    it cannot start. With two, `Cluster.ssh` says why Open MPI cannot reach the second node, if it
    cannot."""
    if os.geteuid() != 0:
        raise Unavailable("the test cluster runs PBS's daemons as root")
    for tool in ("ip", "nsenter", "unshare", "mount", "pgrep"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} is not installed: the PBS node needs it for its namespaces")
    _can_make_namespaces()
    exec_ = installed() or build()
    apt_install(["postgresql"])
    cluster = Cluster(folder, exec_, NODES[:nodes])
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
        hosts = _create_network(folder, cluster.nodes)
    except ClusterError as e:
        raise ClusterError(f"cannot make the nodes' network namespaces: {e}") from None
    MOUNT_POINT.mkdir(mode=0o755, parents=True, exist_ok=True)
    _write_confs(cluster)
    client = None
    if len(cluster.nodes) > 1:
        cluster.ssh = pbs_ssh.missing()
        client = None if cluster.ssh else pbs_ssh.prepare(folder, {n: address(n) for n in NODES})
    for node in cluster.nodes:
        cluster.holders[node] = _hold_namespaces(folder, node, hosts, client)
    init = str(cluster.exec_ / "libexec" / "pbs_init.d")
    for node in cluster.nodes:
        try:  # PBS_HOME (the datastore) first, so that the mom's config is there when it starts
            cluster.on_node(str(cluster.exec_ / "libexec" / "pbs_habitat"), node=node)
            _mom_config(cluster, node)
            cluster.on_node(init, "start", node=node)
        except ClusterError as e:
            logs = folder / node / "home"
            raise ClusterError(f"PBS did not start on {node}: {e}; see {logs}/*_logs") from None
    for setting in QMGR:
        cluster.qmgr(setting)
    pbsnodes = str(cluster.exec_ / "bin" / "pbsnodes")
    known = cluster.on_node(pbsnodes, "-a").stdout
    for node in cluster.nodes:
        if node not in known:
            cluster.qmgr(f"create node {node}")
    if client is not None:
        pbs_ssh.start(cluster)
    deadline = time.monotonic() + 120
    for node in cluster.nodes:
        while "state = free" not in (state := cluster.on_node(pbsnodes, node).stdout):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"node {node} did not become free (pbsnodes says {state!r}); see {folder}"
                )
            time.sleep(1)
    return cluster


def _hold_namespaces(folder: Path, node: str, hosts: Path, client: Path | None) -> subprocess.Popen:
    """A process in the node's namespaces, with its host name, /etc/hosts, PBS_HOME and (`client`)
    ssh's client settings in place, that lives until the namespace is removed."""
    root = folder / node
    root.mkdir(mode=0o755)
    root.chmod(0o755)  # whatever the umask: PBS refuses a PBS_HOME others may write to
    ssh = f"mount --bind {client} {pbs_ssh.CLIENT_CONFIG} && " if client else ""
    holder = subprocess.Popen(
        [
            "nsenter",
            f"--net=/run/netns/{namespace(node)}",
            "unshare",
            "--uts",
            "--mount",
            "--ipc",
            "sh",
            "-c",
            f"hostname {node} && mount --bind {hosts} /etc/hosts && {ssh}"
            f"mount --bind {root} {MOUNT_POINT} && echo ready && exec sleep infinity",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stderr is not None
    if holder.stdout.readline().strip() != "ready":
        raise ClusterError(f"cannot make {node}'s namespaces: {holder.stderr.read()}")
    return holder
