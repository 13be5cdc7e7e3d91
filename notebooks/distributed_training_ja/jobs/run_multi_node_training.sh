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
# LR_RULE: how the learning rate follows the total batch (constant, linear, warmup);
# BATCHSIZE: images per rank and step, instead of the site's (strong scaling: the site's batch / ranks);
# PROFILE=1: time each step's phases per rank, over one epoch (a median needs no more);
# PROFILE=nsys: that, under Nsight Systems, one report per rank;
# STAGE_DATA=1: copy the data set to this node's $TMPDIR (else /tmp) first and train from the copy;
# the log says how long the copy took.
profiler=()
if [ "${PROFILE:-}" = nsys ]; then
    command -v nsys >/dev/null || { echo "PROFILE=nsys: nsys (Nsight Systems) is not on this node's PATH; load its module in the site profile's setup, or use PROFILE=1"; exit 2; }
    mkdir -p runs
    profiler=(nsys profile --trace=cuda,nvtx,mpi --output "runs/nsys-${PBS_JOBID:-${SLURM_JOB_ID:-job}}-rank%q{OMPI_COMM_WORLD_RANK}")
fi
python -m course launch --allreduce "${ALLREDUCE:-}" ${STAGE_DATA:+--stage-data} -- "${profiler[@]}" \
    python train_cifar_multi_node.py $COURSE_TRAIN_ARGS --communicator "${COMMUNICATOR:-auto}" \
    --lr-rule "${LR_RULE:-warmup}" ${BATCHSIZE:+--batchsize "$BATCHSIZE"} ${PROFILE:+--profile --epoch 1}
