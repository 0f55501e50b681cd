#!/usr/bin/env bash
# Categorical features on a GPU machine, against CatBoost's GPU mode: one call does it all,
# logs land in $OUT.
#
#   bash bench/categorical_check.sh [tests|bench|tests,bench] [bench/categorical.py options]
#   (default: bench)
#
# Carried packages (in .whl/, ignored by git), each unpacked to /tmp and put first on
# PYTHONPATH: np.tar.xz, a numpy 2.3 tree (numba-cuda 0.30 cannot import the image's numpy
# 2.5); cb.tar.xz, CatBoost's wheel tree cut to the sm_90 device code
# (`python bench/categorical_wheel.py catboost-*.whl`, 11 MiB); cpu.tar.xz (optional:
# xgboost-cpu and lightgbm, for --libs lightgbm,xgboost). Steps:
#   tests  tests/categorical/test_cuda_categorical_gpu.py (device statistics and
#          combinations: GPU == CPU models; prediction from raw values on the GPU)
#   bench  bench/categorical.py --sets $SETS (default ctr200k,ctr1m) --libs $LIBS (default
#          histboost:cuda,catboost:gpu) and the options given: train time, AUC, logloss,
#          prediction time (histboost on the GPU, from host data and from a CUDA tensor)
set -uo pipefail
what=${1:-bench}
shift || true
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
site=""
for pkg in np cb cpu; do
    if [[ -f .whl/$pkg.tar.xz ]]; then
        mkdir -p /tmp/$pkg && tar xJf .whl/$pkg.tar.xz -C /tmp/$pkg || exit 1
        site="$site/tmp/$pkg:"
    fi
done
export PYTHONPATH="$site$PWD"
python3 - <<'PY' 2>&1 | tee "$OUT/env.txt"
import os
import numpy, numba, torch
print("numpy", numpy.__version__, "numba", numba.__version__, "torch", torch.__version__,
      "cpus", os.cpu_count())
print("GPU:", torch.cuda.get_device_name(0))
try:
    import catboost
    print("catboost", catboost.__version__, catboost.__file__)
except Exception as e:
    print("catboost unavailable:", e)
PY
status=0
if [[ $what == *tests* ]]; then
    timeout 600 python3 -m pytest -q -x -p no:cacheprovider -W "ignore:Grid size" \
        tests/categorical/test_cuda_categorical_gpu.py 2>&1 | tee "$OUT/tests.txt" || status=1
fi
if [[ $what == *bench* ]]; then
    timeout 900 python3 bench/categorical.py --sets "${SETS:-ctr200k,ctr1m}" \
        --libs "${LIBS:-histboost:cuda,catboost:gpu}" "$@" 2>&1 | tee "$OUT/bench.txt" \
        || status=1
fi
exit $status
