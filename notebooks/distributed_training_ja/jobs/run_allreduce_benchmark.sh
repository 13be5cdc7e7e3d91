#!/bin/bash
# The allreduce micro-benchmark: MPI_Allreduce of 4 KiB to 64 MiB on every rank of the job, per algorithm.
# Submit from the folder that holds the notebooks:  qsub -j oe jobs/run_allreduce_benchmark.sh
# Other settings:  qsub -j oe -l select=1:mpiprocs=4 -v ROUNDS=3 jobs/run_allreduce_benchmark.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=2
#PBS -l walltime=00:10:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "submit from the folder that holds the notebooks and jobs/"; exit 2; }
source jobs/site_env.sh

# Open MPI fixes its allreduce algorithm when the ranks start, so each algorithm gets its own short
# mpiexec burst (course launch --allreduce sets it), and the bursts take turns ROUNDS times: noise from
# other jobs on the node then falls on every algorithm alike. Each burst writes its file into
# runs/allreduce-<job id>/; BUDGET: seconds of timed repeats per burst. Notebook 04 adds
# ALGORITHMS="ring parameter_server" (no allreduce: rank 0 gathers and sends back, one rank at a
# time), PREFIX=exchange (its files go to runs/exchange-<job id>/) and SIZES (bytes, spaced).
for _ in $(seq "${ROUNDS:-2}"); do
    for algorithm in ${ALGORITHMS:-ring recursive_doubling}; do
        if [ "$algorithm" = parameter_server ]; then
            launch=(python -m course launch --) pattern=(--pattern parameter_server)
        else
            launch=(python -m course launch --allreduce "$algorithm" --) pattern=()
        fi
        # shellcheck disable=SC2086 # SIZES: one argument per size
        "${launch[@]}" python -m course.runtime.allreduce_bench "${pattern[@]}" \
            --budget "${BUDGET:-1.5}" --prefix "${PREFIX:-allreduce}" ${SIZES:+--sizes $SIZES}
    done
done
