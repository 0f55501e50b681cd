#!/usr/bin/env bash
# Build-check-time script for a GPU machine: one call does everything, logs land in $OUT.
#
#   bash bench/gpu_check.sh [tests|bench|ctr|all] [bench/embedding.py options]  (default: all)
#
# Wheels in .whl/ (e.g. a numpy<2.5 wheel: numba-cuda 0.30 cannot import numpy 2.5) are
# installed into /tmp/site first and put on PYTHONPATH. Steps:
#   tests  the CUDA test files (real kernels, compared with the CPU implementation)
#   bench  bench/embedding.py at the issue's sizes
#   ctr    examples/ctr.py on the GPU (hash embeddings vs nn.EmbeddingBag)
set -uo pipefail
what=${1:-all}
shift || true
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
python3 - <<'EOF' 2>&1 | tee "$OUT/env.txt"
import importlib.metadata as md
import numpy, numba, torch
from numba import cuda
print("numpy", numpy.__version__, "numba", numba.__version__, "numba-cuda",
      md.version("numba-cuda"), "cuda-core", md.version("cuda-core"), "torch", torch.__version__)
print("cuda available (torch):", torch.cuda.is_available(), torch.cuda.get_device_name(0))
print("numba-cuda sees:", cuda.gpus[0].name, "cc", cuda.gpus[0].compute_capability)
EOF
status=0
if [[ $what == tests || $what == all ]]; then
    python3 -m pytest -q -p no:cacheprovider -W "ignore:Grid size" tests/embedding/test_gpu.py \
        tests/embedding/test_cuda_compile.py 2>&1 | tee "$OUT/tests.txt" || status=1
fi
if [[ $what == bench || $what == all ]]; then
    python3 bench/embedding.py --json "$OUT/embedding.json" "$@" 2>&1 | tee "$OUT/bench.txt" \
        || status=1
fi
if [[ $what == ctr || $what == all ]]; then
    python3 examples/ctr.py --device cuda --rows 500000 --batch 4096 \
        --synth shared/bench/synth.py 2>&1 \
        | tee "$OUT/ctr.txt" || status=1
fi
exit $status
