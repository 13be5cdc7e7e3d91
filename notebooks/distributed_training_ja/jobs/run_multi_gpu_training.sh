#!/bin/bash
# ステージ 2: MultiprocessParallelUpdater で、1 つのプロセスがノードのすべての GPU を使って
# 学習します。
# ノートブックのあるフォルダからの投入:             qsub -j oe jobs/run_multi_gpu_training.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=1
#PBS -l ngpus=2
#PBS -l walltime=00:30:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "ノートブックと jobs/ があるフォルダから投入してください"; exit 2; }
source jobs/site_env.sh

# ステージ 2 のノートブックが書いたスクリプトです。GPU 1 台ごとのワーカーは、
# スクリプト自身が fork します（mpiexec は使いません）。
python train_cifar_multi_gpu.py $COURSE_TRAIN_ARGS
