#!/bin/bash
# ステージ 3: ChainerMN。ジョブのすべてのノードで、GPU 1 台につき MPI ランク 1 つ
# （CPU ではコア 1 つにつき 1 つ）。
# ノートブックのあるフォルダからの投入:             qsub -j oe jobs/run_multi_node_training.sh
# 設定を変えて投入するには:  qsub -j oe -l select=2:mpiprocs=2 -v COMMUNICATOR=naive jobs/run_multi_node_training.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=2
#PBS -l walltime=00:30:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "ノートブックと jobs/ があるフォルダから投入してください"; exit 2; }
source jobs/site_env.sh

# course launch は、ジョブのホストとスロットごとに 1 ランクを指定して $COURSE_MPIEXEC を起動し、
# そのコマンドを表示します。
# COMMUNICATOR: ChainerMN のコミュニケータ（既定: GPU では pure_nccl、CPU では naive）。
# ALLREDUCE: その下で使う Open MPI の Allreduce アルゴリズム（ring、recursive_doubling など）。
# LR_RULE: 学習率を全体のバッチサイズにどう合わせるか（constant: 一定、linear: 線形、
# warmup: ウォームアップ）。
# BATCHSIZE: ランクとステップごとの画像数。サイトの値の代わりに使います（強スケーリングでは
# サイトのバッチ / ランク数）。
# PROFILE=1: 1 エポックの間、各ステップのフェーズの時間をランクごとに測ります
# （中央値にはそれで足ります）。
# PROFILE=nsys: それを Nsight Systems の下で行い、ランクごとにレポートを 1 つ作ります。
# STAGE_DATA=1: まずデータセットをこのノードの $TMPDIR（なければ /tmp）にコピーし、そのコピーから
# 学習します。コピーにかかった時間はログに出ます。
profiler=()
if [ "${PROFILE:-}" = nsys ]; then
    command -v nsys >/dev/null || { echo "PROFILE=nsys: このノードの PATH に nsys（Nsight Systems）がありません。サイトプロファイルの setup でそのモジュールを読み込むか、PROFILE=1 を使ってください"; exit 2; }
    mkdir -p runs
    profiler=(nsys profile --trace=cuda,nvtx,mpi --output "runs/nsys-${PBS_JOBID:-${SLURM_JOB_ID:-job}}-rank%q{OMPI_COMM_WORLD_RANK}")
fi
python -m course launch --allreduce "${ALLREDUCE:-}" ${STAGE_DATA:+--stage-data} -- "${profiler[@]}" \
    python train_cifar_multi_node.py $COURSE_TRAIN_ARGS --communicator "${COMMUNICATOR:-auto}" \
    --lr-rule "${LR_RULE:-warmup}" ${BATCHSIZE:+--batchsize "$BATCHSIZE"} ${PROFILE:+--profile --epoch 1}
