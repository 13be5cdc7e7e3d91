#!/bin/bash
# Stage 3: ChainerMN, one MPI rank per GPU (per core on CPUs) on every node of the job.
# Submit from the folder that holds the notebooks:  qsub -j oe jobs/run_multi_node_training.sh
# Other settings:  qsub -j oe -l select=2:mpiprocs=2 -v COMMUNICATOR=naive jobs/run_multi_node_training.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=2
#PBS -l walltime=00:30:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "submit from the folder that holds the notebooks and jobs/"; exit 2; }
source jobs/site_env.sh

# course launch starts $COURSE_MPIEXEC with the job's hosts and one rank per slot, and prints it.
# COMMUNICATOR: a ChainerMN communicator (default: pure_nccl on GPUs, naive on CPUs);
# ALLREDUCE: Open MPI's allreduce algorithm under it (ring, recursive_doubling, ...);
# LR_RULE: how the learning rate follows the total batch (constant, linear, warmup).
python -m course launch --allreduce "${ALLREDUCE:-}" -- \
    python train_cifar_multi_node.py $COURSE_TRAIN_ARGS --communicator "${COMMUNICATOR:-auto}" \
    --lr-rule "${LR_RULE:-warmup}"
