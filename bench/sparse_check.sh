#!/usr/bin/env bash
# Sparse benchmark on the device host (16 cores): one call does it all, logs land in $OUT.
#
#   bash bench/sparse_check.sh [bench,two] [bench/sparse.py options]   (default: bench)
#
#   bench     bench/sparse.py at its default size (200k x 100,000 sparse_like, 100 rounds,
#             63 leaves): histboost, LightGBM and XGBoost hist on all 16 cores, in one run
#   two       the same on two cores (taskset -c 0,1, 2 threads)
# Options after the first argument go to every bench/sparse.py run (e.g. --libs, --timeout).
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
nproc | sed 's/^/cores: /' | tee "$OUT/host.txt"
if [[ $what == *bench* ]]; then
    timeout 590 python3 bench/sparse.py "$@" 2>&1 | tee "$OUT/sparse.txt" || status=1
fi
if [[ $what == *two* ]]; then
    NUMBA_NUM_THREADS=2 timeout 590 taskset -c 0,1 python3 bench/sparse.py --threads 2 "$@" \
        2>&1 | tee "$OUT/sparse-two.txt" || status=1
fi
exit $status
