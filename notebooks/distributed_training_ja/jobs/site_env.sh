# ジョブスクリプトが共有するサイトの設定です: コースキットの `local` サイトプロファイル。
# `python -m course site apply local` がそのプロファイルから書き出しました。設定を変えるには、
# プロファイルを変えてもう一度適用してください。
export COURSE_SITE=local
export COURSE_SCHEDULER=local
export COURSE_LANG="${COURSE_LANG:-ja}"  # ジョブの中でキットが表示する言語（qsub は環境変数を渡さないため、ここで設定します）

# スケジューラが再実行したジョブは、最初に何回目の試行かを出力します（course/contracts/jobend.py）。
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] 2>/dev/null; then
    echo "course: job $SLURM_JOB_ID attempt $((SLURM_RESTART_COUNT + 1)) started at" \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi

# ソフトウェア: モジュールとキットの Python 環境。
: # 読み込むものはありません。ジョブは投入した環境を引き継ぎます

# データと学習の既定値。ステージどうしを比べられるよう、どのステージでも同じにします。
export COURSE_DATASET="${COURSE_DATASET:-synthetic}"
export COURSE_TRAIN_ARGS="${COURSE_TRAIN_ARGS:---model vgg --width 16 --batchsize 64 --epoch 3}"

# MPI: ジョブのランクとホストは `python -m course launch` が埋めます。
export COURSE_MPIEXEC='mpiexec -n {nprocs} --hostfile {hostfile} --bind-to core'
export OMP_NUM_THREADS=1
export OPENBLAS_NUM_THREADS=1
export MKL_NUM_THREADS=1
export CHAINERMN_FORCE_ABORT_ON_EXCEPTION=1  # 1 つのランクの例外でジョブを終わらせ、ハングさせません

# このサイトでの実行方法（`python -m course submit` とノートブックが読みます）。
export COURSE_SELECT='{nodes}:mpiprocs={ranks_per_node}'
export COURSE_RESOURCES=''  # PBS のもの以外の、サイト独自の -l リソース
export COURSE_QUEUES=''
export COURSE_QUEUE=''  # #PBS の行の -q
export COURSE_GROUP=''  # #PBS の行の -W group_list
export COURSE_GPUS_PER_NODE=0
export COURSE_SCALING_RUNS='1x1 1x2'
export COURSE_COMMUNICATION='naive naive/ring'

# キットの gpu extra の CUDA ライブラリ（ない場合は何も出力しません）。
eval "$(python -m course env)"

# 結合されたログの最後の行が、ジョブがどう終わったかとその時刻を示します（course/contracts/jobend.py）。
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
