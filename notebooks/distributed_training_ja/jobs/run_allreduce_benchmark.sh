#!/bin/bash
# Allreduce のマイクロベンチマーク: ジョブのすべてのランクで、4 KiB から 64 MiB までの
# MPI_Allreduce をアルゴリズムごとに測ります。
# ノートブックのあるフォルダからの投入:             qsub -j oe jobs/run_allreduce_benchmark.sh
# 設定を変えて投入するには:  qsub -j oe -l select=1:mpiprocs=4 -v ROUNDS=3 jobs/run_allreduce_benchmark.sh
# >>> site directives: written by `python -m course site apply` >>>
#PBS -l select=1:mpiprocs=2
#PBS -l walltime=00:10:00
# <<< site directives <<<
set -eo pipefail
cd "${PBS_O_WORKDIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
[ -f jobs/site_env.sh ] || { echo "ノートブックと jobs/ があるフォルダから投入してください"; exit 2; }
source jobs/site_env.sh

# Open MPI は Allreduce のアルゴリズムをランクの起動時に決めてしまうので、アルゴリズムごとに
# 短い mpiexec の実行（バースト）を分け（アルゴリズムは course launch --allreduce が設定します）、
# 各アルゴリズムのバーストを順番に実行することを ROUNDS 回繰り返します。こうすると、ノード上の
# ほかのジョブによるノイズが、どのアルゴリズムにも同じようにかかります。各バーストは
# runs/allreduce-<job id>/ にファイルを 1 つ書きます。BUDGET: バーストごとの、時間を測る
# 繰り返しの秒数。ノートブック 04 は ALGORITHMS="ring parameter_server"（Allreduce を使わず、
# ランク 0 が 1 ランクずつ集めて送り返します）、PREFIX=exchange（ファイルは runs/exchange-<job id>/
# に入ります）と SIZES（バイト数、空白区切り）を加えます。
for _ in $(seq "${ROUNDS:-2}"); do
    for algorithm in ${ALGORITHMS:-ring recursive_doubling}; do
        if [ "$algorithm" = parameter_server ]; then
            launch=(python -m course launch --) pattern=(--pattern parameter_server)
        else
            launch=(python -m course launch --allreduce "$algorithm" --) pattern=()
        fi
        # shellcheck disable=SC2086 # SIZES: サイズ 1 つにつき引数 1 つ
        "${launch[@]}" python -m course.runtime.allreduce_bench "${pattern[@]}" \
            --budget "${BUDGET:-1.5}" --prefix "${PREFIX:-allreduce}" ${SIZES:+--sizes $SIZES}
    done
done
