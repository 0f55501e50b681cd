#!/usr/bin/env bash
# Build-check-time script for a host with several GPUs (device kinds nvidia-h200-x2 / -x4): one
# call runs the multi-GPU measurements, logs land in $OUT.
#
#   bash bench/multigpu_check.sh [nccl,train,embed] (default: all three)
#
#   nccl   torchrun bench/collective.py --nccl on 2 GPUs, then on 4 when the host has them:
#          every algorithm checked against native NCCL, then bus bandwidth 1-256 MB
#   train  bench/distributed.py --device cuda: one process per GPU over NCCL, higgs_like
#          $TRAIN_ROWS x 28 (default 20M), $TRAIN_ROUNDS rounds (default 100), depth 8, both
#          tree learners, quantised: ms/round, bytes per tree, model = one GPU's
#   embed  bench/embedding_distributed.py: DistributedHashEmbeddingBag (both layouts) on 2 (and 4)
#          GPUs against one, results checked against one process
# Carried: .whl/np.tar.xz (numpy 2.3 for numba-cuda), unpacked to /tmp and put first on
# PYTHONPATH, as bench/gpu_tree_check.sh does; ../shared/bench/synth.py through shared/.
set -uo pipefail
what=${1:-nccl,train,embed}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache NCCL_DEBUG=${NCCL_DEBUG:-WARN}
site=""
if [[ -f .whl/np.tar.xz ]]; then
    mkdir -p /tmp/np && tar xJf .whl/np.tar.xz -C /tmp/np || exit 1
    site="/tmp/np:"
fi
export PYTHONPATH="$site$PWD"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt"
worlds="2"
[[ $gpus -ge 4 ]] && worlds="2 4"
status=0
if [[ $what == *nccl* ]]; then
    for w in $worlds; do
        timeout 300 torchrun --standalone --nproc_per_node="$w" bench/collective.py --nccl \
            --max-mb 256 --min-time 0.05 --reps 2 --out "$OUT" 2>&1 | tee "$OUT/nccl$w.txt" || status=1
    done
fi
if [[ $what == *train* ]]; then
    workers=1,${worlds// /,}
    timeout 600 python3 bench/distributed.py --device cuda --rows "${TRAIN_ROWS:-20000000}" \
        --test-rows 1000000 --rounds "${TRAIN_ROUNDS:-100}" --workers "$workers" 2>&1 \
        | tee "$OUT/train.txt" || status=1
fi
if [[ $what == *embed* ]]; then
    timeout 300 python3 bench/embedding_distributed.py --workers "${worlds// /,}" 2>&1 \
        | tee "$OUT/embed.txt" || status=1
fi
exit $status
