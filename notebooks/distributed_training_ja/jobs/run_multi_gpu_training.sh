#!/bin/bash
# Stage 2: one process that trains on every GPU of the node with MultiprocessParallelUpdater.
# Submit from the folder that holds the notebooks:  qsub -j oe jobs/run_multi_gpu_training.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=1
#PBS -l ngpus=2
#PBS -l walltime=00:30:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "submit from the folder that holds the notebooks and jobs/"; exit 2; }
source jobs/site_env.sh

# The script the stage-2 notebook wrote; it forks one worker per GPU itself (no mpiexec).
python train_cifar_multi_gpu.py $COURSE_TRAIN_ARGS
