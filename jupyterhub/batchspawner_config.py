"""The kit's hub (jupyterhub_config.py) with each user's server a Slurm job on a compute node, as at
a centre whose Jupyter portal runs JupyterLab on the cluster (batchspawner's SlurmSpawner; tested by
tests/test_hub_batch.py on the kit's two-node test cluster).

Run as jupyterhub_config.py says, on a host where Slurm's commands work (the login node, say), with
this file instead and the hub's address on the nodes' network:

    COURSE_HUB_HUB_IP=10.0.0.1 [COURSE_HUB_PARTITION=course] [COURSE_HUB_WALLTIME=4:00:00] \\
    COURSE_HUB_INSTRUCTORS=... (the other settings as in jupyterhub_config.py) \\
    /path/to/kit/.venv/bin/jupyterhub -f /path/to/kit/jupyterhub/batchspawner_config.py

The kit, its .venv, the users' homes and the exchange must be at the same paths on the nodes (a
shared file system), the users must exist there, and the hub's host must resolve the nodes' names
as squeue prints them. docs/instructors.md ("On JupyterHub") explains each setting.
"""

import sys
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

from course import paths  # noqa: E402
from course.instructor import hub  # noqa: E402

c = get_config()  # noqa: F821 (JupyterHub provides it)
load_subconfig(str(KIT / "jupyterhub" / "jupyterhub_config.py"))  # noqa: F821
env = paths.tool_environment()
batch = hub.batch_settings(env)

c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
# The servers call the hub's API from the nodes: it listens on the nodes' network (the proxy, on
# this host, still serves the users).
c.JupyterHub.hub_ip = batch.hub_ip
# The server listens on every address of its node, on a port batchspawner-singleuser picks there
# and reports to the hub; the hub and the proxy reach it by the node's name that squeue gives.
singleuser = Path(hub.singleuser())
c.SlurmSpawner.batchspawner_singleuser_cmd = str(singleuser.with_name("batchspawner-singleuser"))
# It starts from the shared file system, often slower than on the hub's host: 2 minutes to answer.
c.SlurmSpawner.http_timeout = 120
c.SlurmSpawner.req_partition = batch.partition
c.SlurmSpawner.req_runtime = batch.walltime
# sbatch, squeue and scancel run as the user; the hub runs as root, so runuser (util-linux) does it
# without the sudo rule batchspawner's default (`sudo -E -u`) needs.
c.SlurmSpawner.exec_prefix = "runuser -u {username} --"
# A Slurm whose configuration is not in its default place: the servers' jobs (and the students'
# own sbatch or qsub from them) read the hub's SLURM_CONF.
if env.get("SLURM_CONF"):
    c.Spawner.environment["SLURM_CONF"] = env["SLURM_CONF"]
