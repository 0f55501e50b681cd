#!/usr/bin/env bash
# Build-check-time script of the CPU engine for the device host (16 cores): one call does it
# all, logs land in $OUT.
#
#   bash bench/cpu_check.sh [bench,pairs,profile,dist2,firstrun] [bench/cpu.py options]
#   (default: bench)
#
#   warm      first write 24 GiB once: a freshly started virtual machine backs its memory on
#             the first touch of each page, which made the first benchmark of a run up to 2x
#             slower (measured: 7.6 s, then 2.4 s, for the same 20 rounds in one call)
#   bench     bench/cpu.py: histboost's three configurations against LightGBM, XGBoost and
#             scikit-learn on 1M x 28 higgs_like, all 16 cores
#   pairs     bench/cpu.py's histboost configurations and LightGBM in turns, REPEATS times
#             (default 3; ROUNDS rounds, default 200): medians, ranges and every sample, so
#             that a drift of the machine over the call touches all alike; with COMPARE=DIR
#             (a checkout under shared/, e.g. shared/main from `git archive`), that
#             checkout's histboost configurations run in the same turns
#   profile   bench/cpu_profile.py on all cores (ROUNDS_PROFILE rounds, default 50), with
#             LightGBM's time for the same rounds in the same process after each configuration
#   variants  bench/cpu_profile.py --variants "$VARIANTS": backend constants timed against each
#             other in one process, in turns (REPEATS, default 2; ROUNDS_PROFILE rounds)
# pairs, profile and variants pin every library to the same threads: NUMBA_NUM_THREADS, OMP_NUM_THREADS
# and --threads all equal to the cores of the machine (nproc), under taskset over those cores.
#   two       bench/cpu.py's histboost configurations and LightGBM on two cores (taskset, 2
#             threads, 50 rounds; REPEATS_TWO turns, default 1)
#   dist2     bench/distributed.py on two cores (taskset): 1 process x 2 threads against
#             2 processes x 1 thread, the issue's communication target; then the latency
#             and bandwidth of the collectives on those two cores (bench/collective.py)
#   firstrun  examples/train_higgs.py with an empty Numba cache, then again
#   old       histboost's three configurations of bench/cpu.py again with an older histboost
#             first on PYTHONPATH, for an A/B in one run: extract it beforehand with
#             mkdir -p shared/old && git archive COMMIT histboost | tar x -C shared/old
#             (shared/ travels with carry "shared"; remove shared/old afterwards); with
#             "two" too, the older histboost's configurations also run on two cores
# Carried (in .whl/, ignored by git): cpu.tar.xz, the trees of the xgboost-cpu and lightgbm
# wheels, and np.tar.xz (numpy 2.3), unpacked to /tmp and put first on PYTHONPATH.
set -uo pipefail
what=${1:-bench}
shift || true
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
site=""
for pkg in np cpu; do
    if [[ -f .whl/$pkg.tar.xz ]]; then
        mkdir -p /tmp/$pkg && tar xJf .whl/$pkg.tar.xz -C /tmp/$pkg || exit 1
        site="$site/tmp/$pkg:"
    fi
done
export PYTHONPATH="$site$PWD"
status=0
if [[ $what == *warm* ]]; then
    python3 -c "import numpy as np; a = np.ones(3 << 30); print('warm', a.sum())" || status=1
fi
if [[ $what == *firstrun* ]]; then
    for run in first second; do
        [[ $run == first ]] && rm -rf /tmp/numba-first
        start=$(date +%s%N)
        NUMBA_CACHE_DIR=/tmp/numba-first timeout 300 python3 examples/train_higgs.py > /dev/null \
            || status=1
        echo "train_higgs.py $run run: $(( ($(date +%s%N) - start) / 1000000 )) ms" \
            | tee -a "$OUT/firstrun.txt"
    done
fi
if [[ $what == *bench* ]]; then
    timeout 590 python3 bench/cpu.py --libs \
        histboost,histboost-depthwise,histboost-quantized,lightgbm,xgboost,sklearn "$@" \
        2>&1 | tee "$OUT/cpu.txt" || status=1
fi
cores=$(nproc)
pin=(env NUMBA_NUM_THREADS="$cores" OMP_NUM_THREADS="$cores" taskset -c "0-$((cores - 1))")
if [[ $what == *profile* ]]; then
    timeout 400 "${pin[@]}" python3 bench/cpu_profile.py --threads "$cores" --lightgbm \
        --rounds "${ROUNDS_PROFILE:-50}" 2>&1 | tee "$OUT/cpu-profile.txt" || status=1
fi
if [[ $what == *variants* ]]; then
    timeout 400 "${pin[@]}" python3 bench/cpu_profile.py --threads "$cores" \
        --rounds "${ROUNDS_PROFILE:-50}" --repeats "${REPEATS:-2}" --variants "$VARIANTS" \
        2>&1 | tee "$OUT/cpu-variants.txt" || status=1
fi
if [[ $what == *pairs* ]]; then
    timeout 590 "${pin[@]}" python3 bench/cpu.py --threads "$cores" --repeats "${REPEATS:-3}" \
        --rounds "${ROUNDS:-200}" ${COMPARE:+--compare "$COMPARE"} \
        --libs histboost,histboost-depthwise,histboost-quantized,lightgbm "$@" \
        2>&1 | tee "$OUT/cpu-pairs.txt" || status=1
fi
if [[ $what == *old* && -d shared/old/histboost ]]; then
    PYTHONPATH="$site$PWD/shared/old:$PWD" NUMBA_CACHE_DIR=/tmp/numba-old timeout 400 \
        python3 bench/cpu.py --libs histboost,histboost-depthwise,histboost-quantized "$@" \
        2>&1 | tee "$OUT/cpu-old.txt" || status=1
fi
if [[ $what == *two* ]]; then
    NUMBA_NUM_THREADS=2 OMP_NUM_THREADS=2 timeout 300 taskset -c 0,1 python3 bench/cpu.py \
        --threads 2 --rounds 50 --repeats "${REPEATS_TWO:-1}" --libs \
        histboost,histboost-depthwise,histboost-quantized,lightgbm "$@" \
        2>&1 | tee "$OUT/cpu-two.txt" || status=1
fi
if [[ $what == *two* && $what == *old* && -d shared/old/histboost ]]; then
    PYTHONPATH="$site$PWD/shared/old:$PWD" NUMBA_CACHE_DIR=/tmp/numba-old NUMBA_NUM_THREADS=2 \
        timeout 300 taskset -c 0,1 python3 bench/cpu.py --threads 2 --rounds 50 --libs \
        histboost,histboost-depthwise,histboost-quantized "$@" \
        2>&1 | tee "$OUT/cpu-two-old.txt" || status=1
fi
if [[ $what == *dist2* ]]; then
    timeout 400 taskset -c 0,1 python3 bench/distributed.py --rows 300000 --test-rows 50000 \
        --rounds 20 --workers 1,2 2>&1 | tee "$OUT/dist2.txt" || status=1
    # the collectives' latency on the same two cores (Gloo over loopback)
    timeout 150 taskset -c 0,1 python3 bench/collective.py --world-size 2 --max-mb 1 \
        --min-time 0.05 --reps 2 2>&1 | tee "$OUT/collective2.txt" || status=1
fi
exit $status
