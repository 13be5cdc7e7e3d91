#!/bin/bash
# モデル並列とデータ並列の比較: コースの VGG を、同じ 2 つの CPU ランクで両方の方法で学習します。
# ノートブックのあるフォルダからの投入:             qsub -j oe jobs/run_model_parallel.sh
# 設定を変えて投入するには:  qsub -j oe -v WIDTH=16,BATCH=64 jobs/run_model_parallel.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=2
#PBS -l walltime=00:10:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "ノートブックと jobs/ があるフォルダから投入してください"; exit 2; }
source jobs/site_env.sh

# 2 つの設定を、1 回の mpiexec の中で ROUNDS 回交互に実行します。それぞれ BATCH 枚の画像で STEPS
# ステップです（合わせて数百枚）。こうすると、ノード上のほかのジョブによるノイズが両方に同じように
# かかります。ファイルは runs/model_parallel-<job id>/ に入ります。
python -m course launch -- python -m course.runtime.model_parallel_bench \
    --width "${WIDTH:-8}" --batch "${BATCH:-32}" --steps "${STEPS:-6}" --rounds "${ROUNDS:-2}"
