#!/bin/bash
# Model parallelism against data parallelism: the course's VGG trained both ways on the same 2 CPU ranks.
# Submit from the folder that holds the notebooks:  qsub -j oe jobs/run_model_parallel.sh
# Other settings:  qsub -j oe -v WIDTH=16,BATCH=64 jobs/run_model_parallel.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=2
#PBS -l walltime=00:10:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "submit from the folder that holds the notebooks and jobs/"; exit 2; }
source jobs/site_env.sh

# The two settings take turns ROUNDS times within one mpiexec, STEPS steps of BATCH images each
# (a few hundred images in all): noise from other jobs on the node falls on both alike. The file goes
# to runs/model_parallel-<job id>/.
python -m course launch -- python -m course.runtime.model_parallel_bench \
    --width "${WIDTH:-8}" --batch "${BATCH:-32}" --steps "${STEPS:-6}" --rounds "${ROUNDS:-2}"
