# Site settings shared by the job scripts: the `local` site profile of the course kit.
# Written by `python -m course site apply local` from that profile; to change a setting,
# change the profile and apply it again.
export COURSE_SITE=local
export COURSE_SCHEDULER=local

# A job the scheduler reruns says first which attempt it is (course/contracts/jobend.py).
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] 2>/dev/null; then
    echo "course: job $SLURM_JOB_ID attempt $((SLURM_RESTART_COUNT + 1)) started at" \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi

# Software: modules and the kit's Python environment.
: # nothing to load: jobs inherit the submitting environment

# Data and training defaults, the same at every stage so that the stages compare.
export COURSE_DATASET="${COURSE_DATASET:-synthetic}"
export COURSE_TRAIN_ARGS="${COURSE_TRAIN_ARGS:---model vgg --width 16 --batchsize 64 --epoch 3}"

# MPI: `python -m course launch` fills in the ranks and hosts of the job.
export COURSE_MPIEXEC='mpiexec -n {nprocs} --hostfile {hostfile} --bind-to core'
export OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
export MKL_NUM_THREADS=1
export CHAINERMN_FORCE_ABORT_ON_EXCEPTION=1  # one rank's exception ends the job, not a hang

# How this site is run, for `python -m course submit` and the notebooks.
export COURSE_SELECT='{nodes}:mpiprocs={ranks_per_node}'
export COURSE_RESOURCES=''  # the site's own -l resources, besides PBS's
export COURSE_QUEUES=''
export COURSE_QUEUE=''  # the -q of its #PBS lines
export COURSE_GROUP=''  # their -W group_list
export COURSE_GPUS_PER_NODE=0
export COURSE_SCALING_RUNS='1x1 1x2'
export COURSE_COMMUNICATION='naive naive/ring'

# The CUDA libraries of the kit's gpu extra (prints nothing without them).
eval "$(python -m course env)"

# The last line of the joined log says how the job ended, and when (course/contracts/jobend.py).
_course_end() {
    local log="/proc/$$/fd/1"
    if [ -f "$log" ] && [ -s "$log" ] && [ "$(tail -c 1 "$log" | wc -l)" -eq 0 ]; then echo; fi
    echo "course: job ${PBS_JOBID:-${SLURM_JOB_ID:-?}} $1 at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
_course_stopped() {
    trap - EXIT; trap '' "$1"
    local children; children=$(jobs -p)
    [ -z "$children" ] || kill -s "$1" $children 2>/dev/null || true
    _course_end "was killed by SIG$1"
    trap - "$1"; kill -s "$1" $$
}
trap '_course_end "ended with exit status $?"' EXIT
if [[ $- != *i* ]]; then
    trap '_course_stopped TERM' TERM; trap '_course_stopped INT' INT; trap '_course_stopped HUP' HUP
fi
