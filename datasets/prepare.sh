#!/bin/bash
# Make the data set the applied site profile names (jobs/site_env.sh): run it once, on a login node,
# as the user whose data folder the jobs read.
#   datasets/prepare.sh                                   # the synthetic set, or what is already there
#   datasets/prepare.sh /path/to/cifar-10-python.tar.gz   # real CIFAR-10 (and its variant, if named)
set -euo pipefail
cd "$(dirname "$0")/.."
source <(grep -E '^export (CHAINER_DATASET_ROOT|COURSE_DATASET)=' jobs/site_env.sh)
python -m course data site ${1:+--from "$1"}
python -m course data list
