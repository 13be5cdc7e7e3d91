"""What both sides of the stage-3 probe agree on: the launcher (mn_ranks) sets them up, the ranks
(mn_probe, under mpiexec) use them, and the checks (multi_node) judge the answers by them."""

from __future__ import annotations

# The probe's environment: the simulated node name of each rank, comma-separated.
HOSTS = "COURSE_PROBE_HOSTS"
# The probe's examples per rank (so that they split evenly over any rank count), and its batch size.
TRAIN_PER_RANK = 16
TEST_PER_RANK = 8
BATCH = 8
SEED = 7  # the seed the probe hands to shard_datasets (and SEED + 1)
