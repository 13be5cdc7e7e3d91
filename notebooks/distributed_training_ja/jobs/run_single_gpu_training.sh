#!/bin/bash
# Stage 1: train on one device (a GPU where the node has one, else one CPU core).
# Submit from the folder that holds the notebooks:  qsub -j oe jobs/run_single_gpu_training.sh
# Without a scheduler:                    python -m course submit jobs/run_single_gpu_training.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=1
#PBS -l walltime=00:30:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "submit from the folder that holds the notebooks and jobs/"; exit 2; }
source jobs/site_env.sh

# The script the stage-1 notebook wrote from your functions.
python train_cifar_single.py $COURSE_TRAIN_ARGS
