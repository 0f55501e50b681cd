"""Models do not depend on the thread count up to 16 forced threads, on the CPU backend's
parallel paths (work items over nodes x row chunks x feature blocks, chunked partitions,
(node, feature) split search with either gain, parallel subtraction), in a subprocess whose
Numba pool has 16 threads (this machine may have 2 cores: the threads are oversubscribed,
which changes nothing but the time). Float trees use weights over 12 decades, so any change
in the order of a float sum would show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json
    import numba as nb
    import numpy as np
    import histboost
    from histboost.testing.data import make_classification
    from histboost.testing.threads import forced_paths

    X, y = make_classification(400, 5, n_classes=2, seed=21)
    w = 10.0 ** np.random.default_rng(4).uniform(-6, 6, len(y))
    configs = {
        "lossguide": {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
        "depthwise": {"max_depth": 4, "colsample_bynode": 0.8},
        "quantised": {"max_depth": 4, "quantized_grad": True},
        # the split search's general gain: weight bounds, then L1
        "monotone": {"max_depth": 4, "monotone_constraints": (1, -1, 0, 1, 0)},
        "l1": {"max_depth": 4, "reg_alpha": 0.5, "max_delta_step": 0.7},
    }
    out = {"pool": nb.config.NUMBA_NUM_THREADS}
    for name, extra in configs.items():
        params = {"objective": "binary:logistic", "max_bin": 16, **extra}
        for n_threads in (1, 2, 3, 16):
            with forced_paths(True, min_rows=8) as calls:
                d = histboost.Dataset(X, label=y, weight=w, max_bin=16)
                b = histboost.train({**params, "nthread": n_threads}, d, 3,
                                    verbose_eval=False)
            trees = b.get_dump(dump_format="json", with_stats=True)
            out[f"{name}/{n_threads}"] = [trees, dict(calls)]
    print(json.dumps(out))
""")


def test_models_identical_for_1_2_3_16_threads():
    env = {**os.environ, "NUMBA_NUM_THREADS": "16", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("pool") == 16
    for name in ("lossguide", "depthwise", "quantised", "monotone", "l1"):
        models = {t: out[f"{name}/{t}"] for t in (1, 2, 3, 16)}
        assert models[1][0] == models[2][0] == models[3][0] == models[16][0], name
        # the parallel kernels chunked nodes on every multi-thread run, never on one thread
        assert models[1][1] == {}, name
        for t in (2, 3, 16):
            assert models[t][1].get("histogram_chunked", 0) > 0, (name, t)
            assert models[t][1].get("partition_chunked", 0) > 0, (name, t)
