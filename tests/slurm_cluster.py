"""A real one-node Slurm cluster for the tests, from Debian's packages (slurm-wlm, slurm-wlm-torque, munge).

Needs root and apt-get (CI has both): missing packages are installed, munged is started if it
is not running, and slurmctld and slurmd run from a configuration in a temporary folder, on free
ports, so that they never touch a Slurm the machine may already run. Everything started here is
stopped again. Where it cannot run, the tests that use it are skipped with the reason.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurm-wlm-torque", "munge")
PARTITION = "course"  # the queue of sites/slurm-cpu.toml


class Unavailable(Exception):
    """Slurm cannot run here; the message says why."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 * 8 // 10
    return 2000


def install() -> None:
    if all(shutil.which(p) for p in ("slurmctld", "slurmd", "sbatch", "qsub", "munged")):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("Slurm is not installed, and installing it needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
        run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if run.returncode != 0:
            raise Unavailable(f"{' '.join(command)} failed: {(run.stderr or run.stdout).strip()[-300:]}")


@dataclass
class Cluster:
    folder: Path
    started: list[Path] = field(default_factory=list)  # pid files of the daemons started here

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` as a student's shell has it: the kit's environment activated (sbatch exports it to
        the job), and this cluster's configuration."""
        bin_dir = Path(sys.executable).parent
        return {**base, "SLURM_CONF": str(self.conf), "PATH": f"{bin_dir}{os.pathsep}{base.get('PATH', '')}",
                "VIRTUAL_ENV": str(bin_dir.parent)}

    def stop(self) -> None:
        for pid_file in reversed(self.started):
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                continue


def start(folder: Path) -> Cluster:
    if os.geteuid() != 0:
        raise Unavailable("the one-node cluster runs its daemons as root")
    install()
    cluster = Cluster(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0:
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["munged", "--force"], check=True, capture_output=True)
        cluster.started.append(Path("/run/munge/munged.pid"))
    (folder / "state").mkdir(exist_ok=True)
    (folder / "spool").mkdir(exist_ok=True)
    cluster.conf.write_text(f"""\
ClusterName=coursetest
SlurmctldHost=localhost
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmdSpoolDir={folder}/spool
StateSaveLocation={folder}/state
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
SlurmUser=root
ReturnToService=2
MpiDefault=none
KillWait=5
JobAcctGatherType=jobacct_gather/none
NodeName=localhost CPUs={os.cpu_count() or 1} RealMemory={_memory_mb()} State=UNKNOWN
PartitionName={PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
""")
    env = cluster.env(dict(os.environ))
    for command, pid_file in ((["slurmctld", "-f", str(cluster.conf)], folder / "slurmctld.pid"),
                              (["slurmd", "-f", str(cluster.conf), "-N", "localhost"], folder / "slurmd.pid")):
        run = subprocess.run(command, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            cluster.stop()
            raise Unavailable(f"{command[0]} did not start: {(run.stderr or run.stdout).strip()[-300:]}")
        cluster.started.append(pid_file)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env).stdout.strip()
        if state == "idle":
            return cluster
        time.sleep(1)
    cluster.stop()
    raise Unavailable(f"the node did not become idle (sinfo says {state!r}); see {folder}/slurmctld.log")
