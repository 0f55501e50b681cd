#!/usr/bin/env bash
# Build-check-time script of distributed training for the device host (16 cores, a GPU): one
# call does it all, logs land in $OUT.
#
#   bash bench/distributed_check.sh [tests,cpu,gpu] (default: all three)
#
#   tests  the GPU backend's own tests, then two processes sharing the GPU over Gloo: their
#          quantised model equals the one-process CPU model (tests/dist_training/test_processes.py)
#   cpu    bench/distributed.py on the CPU: 1, 2, 4 processes splitting the 16 cores
#   gpu    bench/distributed.py --device cuda: 1 and 2 processes (sharing the GPU when there is
#          one: a correctness and overhead check, not a scaling figure)
#   cores2 the 2-core target on CPUs 0 and 1 (taskset): 300k x 28 rows, "data" learner,
#          1 x 2 threads and 2 x 1 thread alternating, REPS repeats (default 3), each with
#          the collectives' trace (TRACE=0: none); SPIN_US=N adds a 2 x 1 run spinning N us
#          before sleeping in a wait, BEFORE=DIR (another checkout, e.g. the code before a
#          change) its 2 x 1 thread run, after each repeat; then "reduce_scatter" once
#          (RS=0: not) (cores2 is not in the default list)
# Carried: .whl/np.tar.xz (numpy 2.3 for numba-cuda), unpacked to /tmp and put first on
# PYTHONPATH, as bench/gpu_tree_check.sh does.
set -uo pipefail
what=${1:-tests,cpu,gpu}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
site=""
if [[ -f .whl/np.tar.xz ]]; then
    mkdir -p /tmp/np && tar xJf .whl/np.tar.xz -C /tmp/np || exit 1
    site="/tmp/np:"
fi
export PYTHONPATH="$site$PWD"
status=0
if [[ $what == *tests* ]]; then
    timeout 600 python3 -m pytest -q -x -p no:cacheprovider -W "ignore:Grid size" \
        tests/kernels/test_cuda_backend_gpu.py tests/dist_training/test_processes.py -k "gpu or GPU" \
        2>&1 | tee "$OUT/tests.txt" || status=1
fi
if [[ $what == *cpu* ]]; then
    timeout 600 python3 bench/distributed.py --rows 1000000 --test-rows 100000 --rounds 20 \
        --workers 1,2,4 2>&1 | tee "$OUT/cpu.txt" || status=1
fi
if [[ $what == *gpu* ]]; then
    timeout 600 python3 bench/distributed.py --device cuda --rows 2000000 --test-rows 200000 \
        --rounds 20 --workers 1,2 2>&1 | tee "$OUT/gpu.txt" || status=1
fi
if [[ $what == *cores2* ]]; then
    two=(taskset -c 0,1 python3 bench/distributed.py --rows 300000 --test-rows 20000 --rounds 10)
    trace=$([[ ${TRACE:-1} == 1 ]] && echo --trace || true)
    for rep in $(seq 1 "${REPS:-3}"); do
        order=$([[ $((rep % 2)) == 1 ]] && echo 2,1 || echo 1,2)
        timeout 300 "${two[@]}" --workers "$order" --learners data $trace 2>&1 \
            | tee -a "$OUT/cores2.txt" || status=1
        if [[ -n ${SPIN_US:-} ]]; then
            echo "spin $SPIN_US us:" | tee -a "$OUT/cores2.txt"
            HISTBOOST_COLLECTIVE_SHM_SPIN_US=$SPIN_US timeout 300 "${two[@]}" --workers 2 \
                --learners data $trace 2>&1 | tee -a "$OUT/cores2.txt" || status=1
        fi
        if [[ -n ${BEFORE:-} ]]; then
            echo "before ($BEFORE):" | tee -a "$OUT/cores2.txt"
            (cd "$BEFORE" && timeout 300 "${two[@]}" --workers 2 --learners data 2>&1) \
                | tee -a "$OUT/cores2.txt" || status=1
        fi
    done
    if [[ ${RS:-1} == 1 ]]; then
        timeout 300 "${two[@]}" --workers 1,2 --learners reduce_scatter $trace 2>&1 \
            | tee -a "$OUT/cores2.txt" || status=1
    fi
fi
exit $status
