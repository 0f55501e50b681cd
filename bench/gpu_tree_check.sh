#!/usr/bin/env bash
# Build-check-time script of the GPU tree engine for a GPU machine: one call does it all, logs
# land in $OUT.
#
#   bash bench/gpu_tree_check.sh [tests|profile|bench|all] [bench/gpu.py options]
#   (default: all = tests, then bench; "profile" runs alone, or with "tests,profile,bench")
#
# Carried packages (in .whl/, ignored by git): np.tar.xz, a numpy 2.3 tree (numba-cuda 0.30
# cannot import the image's numpy 2.5), and xgb.tar.xz, the xgboost wheel's tree (the peer);
# each is unpacked to /tmp and put first on PYTHONPATH. Steps:
#   tests  the CUDA backend on the GPU: conformance suite, GPU == CPU quantised models,
#          determinism, memory release (tests/kernels/test_cuda_backend_gpu.py); categorical
#          features on the device (tests/categorical/test_cuda_categorical_gpu.py)
#   (GPU_TESTS: the test files of "tests", default both)
#   profile  bench/gpu_profile.py (kernels and host operators under torch.profiler;
#          PROFILE_ARGS: its options, e.g. "--rounds 6")
#   round  bench/gpu_round.py (float and quantised depth-wise rounds alternating in one
#          process, device idle time charged to host ranges; ROUND_ARGS: its options, e.g.
#          "--timing-only --reps 3"); log in $OUT/round.txt, traces in $OUT
#   fixed  bench/gpu_fixed.py (where (train - ingest) / rounds exceeds the steady round: host
#          clocks around a bench/gpu.py-style training; FIXED_ARGS: its options, e.g.
#          "--quantised --runs 2"); log in $OUT/fixed.txt
#   bench  bench/gpu.py (correctness check, then histboost vs XGBoost on higgs_like)
#   compare  bench/gpu.py --configs $COMPARE_CONFIGS (default histboost-root,histboost-depthwise;
#          and the options given) with this tree's package and its correctness check, then
#          --configs $BASELINE_CONFIGS (default the same) with the package of the checkout
#          $BASELINE first on PYTHONPATH (e.g. main: old and new kernels timed by the same
#          script in one call); logs in $OUT/compare.txt
set -uo pipefail
what=${1:-all}
shift || true
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
site=""
for pkg in np xgb; do
    if [[ -f .whl/$pkg.tar.xz ]]; then
        mkdir -p /tmp/$pkg && tar xJf .whl/$pkg.tar.xz -C /tmp/$pkg || exit 1
        site="$site/tmp/$pkg:"
    fi
done
export PYTHONPATH="$site$PWD"
python3 - <<'PY' 2>&1 | tee "$OUT/env.txt"
import importlib.metadata as md
import os
import numpy, numba, torch
from numba import cuda
print("numpy", numpy.__version__, "numba", numba.__version__, "numba-cuda",
      md.version("numba-cuda"), "torch", torch.__version__, "cpus", os.cpu_count())
print("GPU:", torch.cuda.get_device_name(0), "cc", cuda.gpus[0].compute_capability)
try:
    import xgboost
    print("xgboost", xgboost.__version__)
except Exception as e:
    print("xgboost unavailable:", e)
PY
status=0
[[ $what == all ]] && what=tests,bench
if [[ $what == *tests* ]]; then
    timeout 900 python3 -m pytest -q -x -p no:cacheprovider -W "ignore:Grid size" \
        ${GPU_TESTS:-tests/kernels/test_cuda_backend_gpu.py tests/categorical/test_cuda_categorical_gpu.py} \
        2>&1 | tee "$OUT/tests.txt" || status=1
fi
if [[ $what == *profile* ]]; then
    timeout 300 python3 bench/gpu_profile.py --trace "$OUT/trace.json.gz" ${PROFILE_ARGS:-} 2>&1 | tee "$OUT/profile.txt" || status=1
fi
if [[ $what == *round* ]]; then
    timeout 300 python3 bench/gpu_round.py --trace-dir "$OUT" ${ROUND_ARGS:-} 2>&1 \
        | tee "$OUT/round.txt" || status=1
fi
if [[ $what == *fixed* ]]; then
    timeout 300 python3 bench/gpu_fixed.py ${FIXED_ARGS:-} 2>&1 | tee "$OUT/fixed.txt" || status=1
fi
if [[ $what == *compare* ]]; then
    configs=${COMPARE_CONFIGS:-histboost-root,histboost-depthwise}
    for tree in "$PWD" ${BASELINE:-}; do
        check=$([[ $tree == "$PWD" ]] || echo --skip-check)
        [[ $tree == "$PWD" ]] || configs=${BASELINE_CONFIGS:-$configs}
        echo "== package of $tree" | tee -a "$OUT/compare.txt"
        PYTHONPATH="$site$tree" timeout 600 python3 bench/gpu.py $check --configs "$configs" \
            --json "$OUT/compare-$(basename "$tree").json" "$@" 2>&1 \
            | tee -a "$OUT/compare.txt" || status=1
    done
fi
if [[ $what == *bench* ]]; then
    python3 bench/gpu.py --json "$OUT/gpu.json" "$@" 2>&1 | tee "$OUT/bench.txt" || status=1
fi
exit $status
