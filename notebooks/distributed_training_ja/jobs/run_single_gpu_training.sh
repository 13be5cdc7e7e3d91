#!/bin/bash
# ステージ 1: 1 台のデバイスで学習します（ノードに GPU があれば GPU 1 台、なければ CPU コア 1 つ）。
# ノートブックのあるフォルダからの投入:             qsub -j oe jobs/run_single_gpu_training.sh
# スケジューラを使わずに実行するには:     python -m course submit jobs/run_single_gpu_training.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=1
#PBS -l walltime=00:30:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "ノートブックと jobs/ があるフォルダから投入してください"; exit 2; }
source jobs/site_env.sh

# ステージ 1 のノートブックが、そこで書いた関数から書き出したスクリプトです。
python train_cifar_single.py $COURSE_TRAIN_ARGS
