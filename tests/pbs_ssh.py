"""ssh between the test PBS cluster's nodes (tests/pbs_cluster.py). The kit's Open MPI (the `mpi`
extra) is built without PBS's TM interface, so its launcher starts its daemon (`prted`) on a job's
other nodes with ssh, as at a site whose Open MPI lacks TM; the nodes' names come from
PBS_NODEFILE.

All of it is the cluster's own and goes with it: a key pair and a host key made in the cluster's
folder, one sshd per node started in the node's namespaces (so it listens on the node's addresses
only and dies with the namespace), taking root's login by that key alone, and ssh's client settings
bind-mounted over /etc/ssh/ssh_config in the nodes' mount namespaces only. Root's ~/.ssh and this
machine's ssh settings are never written.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tests.pbs_build import Unavailable, apt_install

if TYPE_CHECKING:
    from tests.pbs_cluster import Cluster

PACKAGES = ("openssh-server", "openssh-client")
MARK = "course-pbs-sshd"  # in every sshd's command line (its config's name): leftovers find it
CLIENT_CONFIG = Path("/etc/ssh/ssh_config")  # replaced in the nodes' mount namespaces only
SSHD = Path("/usr/sbin/sshd")  # sshd re-executes itself, so it must be started by absolute path
# sshd's privilege-separation folder, fixed when it was built; Debian's init script makes it, so
# where the package's service never ran, the cluster makes it, and removes it when it goes.
PRIVSEP = Path("/run/sshd")
REACH_TIMEOUT = 60  # seconds for every node's sshd to answer the other node


def missing() -> str:
    """Why the nodes cannot have ssh (openssh cannot be installed here), or ""."""
    try:
        apt_install(PACKAGES)
    except Unavailable as e:
        return (
            "the kit's Open MPI has no PBS TM support, so its launcher starts ranks on a job's "
            f"other node over ssh, and openssh-server is not here: {e}"
        )
    return "" if SSHD.exists() else f"openssh-server is installed but {SSHD} is not there"


def _folder(cluster_folder: Path) -> Path:
    return cluster_folder / "ssh"


def files(cluster_folder: Path) -> list[Path]:
    """The keys and settings `prepare` wrote that are still there."""
    folder = _folder(cluster_folder)
    return sorted(folder.iterdir()) if folder.exists() else []


def remove(cluster_folder: Path) -> None:
    """The keys and settings, and PRIVSEP if `start` made it (once the nodes' sshd are gone)."""
    if (_folder(cluster_folder) / "made-privsep").exists():
        try:
            PRIVSEP.rmdir()
        except OSError:
            pass  # something else has put files there since: not the cluster's any more
    shutil.rmtree(_folder(cluster_folder), ignore_errors=True)


def prepare(cluster_folder: Path, addresses: dict[str, str]) -> Path:
    """The keys, sshd's settings and the client's, for nodes {name: address}; returns the client's
    settings (bind-mounted over CLIENT_CONFIG on the nodes)."""
    folder = _folder(cluster_folder)
    folder.mkdir(mode=0o700)
    for key in ("id", "host_key"):  # root's key; the nodes' host key
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", MARK, "-f", str(folder / key)],
            check=True,
            capture_output=True,
        )
    (folder / "authorized_keys").write_text((folder / "id.pub").read_text())
    host_key = " ".join((folder / "host_key.pub").read_text().split()[:2])
    (folder / "known_hosts").write_text(
        "".join(f"{node},{address} {host_key}\n" for node, address in addresses.items())
    )
    (folder / f"{MARK}_config").write_text(
        f"HostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\n"  # the tests' jobs run as root
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "StrictModes no\n"  # the cluster's folder is under /tmp, which others may write to
        "PrintMotd no\nLogLevel ERROR\n"
    )
    client = folder / "ssh_config"
    client.write_text(
        "Host *\n"
        f"  IdentityFile {folder / 'id'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {folder / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 20\n"
    )
    return client


def start(cluster: Cluster) -> None:
    """sshd on every node; returns once each node has run `hostname` on the others over ssh, as
    Open MPI's launcher will."""
    folder = _folder(cluster.folder)
    if not PRIVSEP.exists():
        (folder / "made-privsep").touch()
        PRIVSEP.mkdir(mode=0o755)
        PRIVSEP.chmod(0o755)  # whatever the umask: sshd refuses one others may write to
    for node in cluster.nodes:
        pid_file = f"PidFile={folder / f'sshd-{node}.pid'}"  # not /run's, which is this machine's
        cluster.on_node(str(SSHD), "-f", str(folder / f"{MARK}_config"), "-o", pid_file, node=node)
    deadline = time.monotonic() + REACH_TIMEOUT
    for node in cluster.nodes:
        for other in (n for n in cluster.nodes if n != node):
            while True:  # sshd listens only some moments after it has gone to the background
                try:
                    said = cluster.on_node("ssh", other, "hostname", node=node, timeout=60)
                    break
                except RuntimeError as e:  # ClusterError: ssh refused or failed
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{node} cannot ssh to {other}: {e}") from None
                    time.sleep(0.5)
            if said.stdout.strip() != other:
                raise RuntimeError(f"ssh {other} hostname on {node} said {said.stdout!r}")
