"""Real Slurm clusters for the tests, from Debian's packages (slurm-wlm, slurm-wlm-torque, munge).

Needs root and apt-get (CI has both): missing packages are installed, munged is started if it
is not running, and slurmctld and the slurmds run from a configuration in a temporary folder, on
free ports, so that they never touch a Slurm the machine may already run. Where it cannot run, the
tests that use it are skipped with the reason.

`start(folder)` is one node, this machine (`localhost`). `start(folder, nodes=2)` is a cluster of
two nodes on this one machine, each a network and UTS namespace of its own (host names `cnode1`,
`cnode2`) with an address on a private bridge, and its own slurmd. The controller, munge and the
test (the "login node") stay in this machine's namespace, on the bridge's address; only these
addresses are ever contacted. Every node also has a mount namespace whose /etc/hosts names the
cluster's hosts, so that Slurm's srun and Open MPI's launcher find each other by name as on a real
cluster. The file system is shared, as a cluster's home and work folders are.

`Cluster.stop()` kills every process left in the nodes' namespaces (daemons, job steps, ranks),
removes the namespaces and the bridge, and stops the daemons started here; `start` first removes
what a killed earlier run may have left.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests import apt

if TYPE_CHECKING:
    from course.cluster.submit import Job

PACKAGES = ("slurm-wlm", "slurm-wlm-torque", "munge")
PARTITION = "course"  # the queue of sites/slurm-cpu.toml
# The two-node cluster's private network: a bridge on this machine and one veth pair per node. The
# addresses are on no other machine's network: the namespaces have no route beyond this subnet.
BRIDGE, SUBNET = "coursebr0", "10.213.46"
CONTROLLER = f"{SUBNET}.1"
NODE_PREFIX = "cnode"


class Unavailable(Exception):
    """Slurm cannot run here; the message says why."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb(nodes: int) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 * 8 // 10 // nodes
    return 2000


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run(command, capture_output=True, text=True)
    if check and run.returncode != 0:
        raise Unavailable(
            f"{' '.join(command)} failed: {(run.stderr or run.stdout).strip()[-300:]}"
        )
    return run


def install() -> None:
    if all(shutil.which(p) for p in ("slurmctld", "slurmd", "sbatch", "qsub", "munged")):
        return
    if not apt.can_install():
        raise Unavailable("Slurm is not installed, and installing it needs root and apt-get")
    failed = apt.install(*PACKAGES)
    if failed:
        raise Unavailable(failed)


@dataclass
class Cluster:
    folder: Path
    nodes: list[str] = field(default_factory=lambda: ["localhost"])
    started: list[Path] = field(default_factory=list)  # pid files of the daemons started here

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` as a student's shell has it: the kit's environment activated (sbatch exports it to
        the job), and this cluster's configuration."""
        bin_dir = Path(sys.executable).parent
        return {
            **base,
            "SLURM_CONF": str(self.conf),
            "PATH": f"{bin_dir}{os.pathsep}{base.get('PATH', '')}",
            "VIRTUAL_ENV": str(bin_dir.parent),
        }

    def start_qsub(self, folder: Path, base: dict[str, str], *arguments: str) -> Job:
        """`qsub -j oe ARGUMENTS` as a student types it in `folder`, from a shell whose environment
        is `base`; the job, queued."""
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

    def qsub(self, folder: Path, base: dict[str, str], *arguments: str) -> Job:
        """start_qsub's job, waited for (the test fails with its log unless it exits 0)."""
        job = self.start_qsub(folder, base, *arguments)
        code = job.wait(timeout=600, echo=None, poll=2)
        assert code == 0, job.find_log().read_text()[-3000:]
        return job

    def stop(self) -> None:
        if self.nodes != ["localhost"]:
            remove_network(self.nodes)
        for pid_file in reversed(self.started):
            try:
                pid = int(pid_file.read_text().strip())
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                continue
            # Gone before the next cluster starts, which then starts its own munged.
            _wait_gone(pid, timeout=60)


def _wait_gone(pid: int, timeout: float) -> None:
    """Wait for process `pid` (not a child of this one) to exit; SIGKILL it past `timeout` s."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if not select.select([handle], [], [], timeout)[0]:  # readable once it has exited
            os.kill(pid, signal.SIGKILL)
            select.select([handle], [], [], 10)
    except ProcessLookupError:
        pass
    finally:
        os.close(handle)


def _namespace(node: str) -> str:
    return f"course-{node}"


def remove_network(nodes: list[str]) -> None:
    """Kill everything that runs in the nodes' namespaces, then remove them and the bridge (no error
    for what is already gone)."""
    for node in nodes:
        namespace = _namespace(node)
        pids = _run("ip", "netns", "pids", namespace, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                continue
        _run("ip", "netns", "del", namespace, check=False)
    _run("ip", "link", "del", BRIDGE, check=False)


def create_network(nodes: list[str], folder: Path) -> Path:
    """The bridge, one namespace per node with its veth and address; returns the hosts file."""
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "add", f"{CONTROLLER}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    lines = ["127.0.0.1 localhost", f"{CONTROLLER} {socket.gethostname()}"]  # the controller's host
    for number, node in enumerate(nodes, start=2):
        namespace, outside = _namespace(node), f"crs-{node}"
        _run("ip", "netns", "add", namespace)
        _run(
            "ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", namespace
        )
        _run("ip", "link", "set", outside, "master", BRIDGE, "up")
        address = f"{SUBNET}.{number}"
        for command in (
            ["ip", "addr", "add", f"{address}/24", "dev", "eth0"],
            ["ip", "link", "set", "eth0", "up"],
            ["ip", "link", "set", "lo", "up"],
        ):
            _run("ip", "netns", "exec", namespace, *command)
        lines.append(f"{address} {node}")
    hosts = folder / "hosts"
    hosts.write_text("\n".join(lines) + "\n")
    return hosts


def start(folder: Path, nodes: int = 1) -> Cluster:
    """The cluster, its nodes idle; Unavailable (with nothing left running) where it cannot
    start."""
    if os.geteuid() != 0:
        raise Unavailable("the test cluster runs its daemons as root")
    install()
    names = ["localhost"] if nodes == 1 else [f"{NODE_PREFIX}{n}" for n in range(1, nodes + 1)]
    cluster = Cluster(folder, names)
    try:
        return _start(cluster, nodes)
    except BaseException:
        cluster.stop()
        raise


def _start(cluster: Cluster, nodes: int) -> Cluster:
    folder, names = cluster.folder, cluster.nodes
    folder.mkdir(parents=True, exist_ok=True)
    if nodes > 1:
        for tool in ("ip", "nsenter", "unshare", "mount"):
            if shutil.which(tool) is None:
                raise Unavailable(
                    f"{tool} is not installed: the two-node cluster needs it for its namespaces"
                )
        remove_network(names)  # what a killed earlier run left
        try:
            hosts = create_network(names, folder)
        except Unavailable as e:
            raise Unavailable(f"cannot make the nodes' network namespaces here: {e}") from None
    # Whether munged answers, not whether pgrep finds one: a munged an earlier cluster stopped stays
    # a zombie where the machine's init does not reap it, and pgrep lists zombies.
    if subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["munged", "--force"], check=True, capture_output=True)
        cluster.started.append(Path("/run/munge/munged.pid"))
    (folder / "state").mkdir(exist_ok=True)
    cpus, memory = os.cpu_count() or 1, _memory_mb(nodes)
    if nodes == 1:
        controller = "SlurmctldHost=localhost"
        node_lines = f"NodeName=localhost CPUs={cpus} RealMemory={memory} State=UNKNOWN"
    else:
        controller = f"SlurmctldHost={socket.gethostname()}\nSlurmctldAddr={CONTROLLER}"
        node_lines = "\n".join(
            f"NodeName={node} NodeAddr={SUBNET}.{number} CPUs={cpus} RealMemory={memory} "
            "State=UNKNOWN"
            for number, node in enumerate(names, start=2)
        )
    for node in names:
        (folder / "spool" / node).mkdir(parents=True, exist_ok=True)
    partition_line = (
        f"PartitionName={PARTITION} Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=FORCE"
    )
    cluster.conf.write_text(f"""\
ClusterName=coursetest
{controller}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmdSpoolDir={folder}/spool/%n
StateSaveLocation={folder}/state
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd-%n.log
SlurmUser=root
ReturnToService=2
MpiDefault=none
KillWait=5
JobAcctGatherType=jobacct_gather/none
{node_lines}
{partition_line}
""")
    env = cluster.env(dict(os.environ))
    daemons = [(["slurmctld", "-f", str(cluster.conf)], folder / "slurmctld.pid")]
    for node in names:
        slurmd = ["slurmd", "-f", str(cluster.conf), "-N", node]
        if nodes > 1:  # in the node's namespaces, with its host name and hosts file
            # nsenter, not `ip netns exec`: that mounts a sysfs of its own, without the cgroup
            # folder slurmd reads
            slurmd = [
                "nsenter",
                f"--net=/run/netns/{_namespace(node)}",
                "unshare",
                "--uts",
                "--mount",
                "sh",
                "-c",
                f'hostname {node} && mount --bind "$0" /etc/hosts && exec "$@"',
                str(hosts),
                *slurmd,
            ]
        daemons.append((slurmd, folder / f"slurmd-{node}.pid"))
    for command, pid_file in daemons:
        run = subprocess.run(command, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            raise Unavailable(
                f"{command[0]} did not start: {(run.stderr or run.stdout).strip()[-300:]}"
            )
        cluster.started.append(pid_file)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=env
        ).stdout.split()
        if states == ["idle"] * nodes:
            return cluster
        time.sleep(1)
    raise Unavailable(
        f"the nodes did not become idle (sinfo says {states!r}); see {folder}/slurmctld.log"
    )


def assignment(solved: Path, folder: Path) -> Path:
    """A copy of the solved assignment without its job outputs, its job scripts set up for the Slurm
    clusters here (sites/slurm-cpu.toml)."""
    from course.cluster import sites

    shutil.copytree(solved, folder, ignore=shutil.ignore_patterns("runs", "*.o*"))
    sites.apply(
        sites.load_profile(
            str(Path(__file__).resolve().parent.parent / "sites" / "slurm-cpu.toml")
        ),
        folder / "jobs",
    )
    return folder
