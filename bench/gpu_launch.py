"""Host cost of a kernel launch, and the launches of a tree (a CUDA device needed).

    python bench/gpu_launch.py [--launches 20000] [--rows 2000000] [--rounds 12]
        [--label NAME] [--micro-only] [--json PATH]

1. Host microseconds per launch of a one-block kernel taking the split search's mix of
   arguments (12 arrays of 1-3 dimensions, 3 scalars: 15 arguments, 91 flattened
   parameters), in batches of 100 launches (the host's time in the batch, the device
   synchronised between batches; median over batches) through
   (a) `CudaKernel.launch` of the histboost package first on PYTHONPATH, the same tensors
       every launch, and (a') one of them a new view every launch (the view's own cost
       included: row (v) alone);
   (b) `cuda.core.launch` with the parameters flattened once (Kernel, LaunchConfig and
       Stream made once);
   (c) the driver's `cuLaunchKernel` through `cuda.bindings` with a parameter buffer packed
       once (handle and stream read once);
   (d) a torch operator (`add_` of a scalar to a 1-element tensor), for scale;
   and the launcher's pieces alone: `flatten_args` on kept tensors (f), torch's current
   stream as a `Stream` object (s1) and as a raw handle (s2).
2. (unless --micro-only) Per grow policy (depth-8 depth-wise, 255-leaf lossguide, float
   gradients as `bench/gpu_ab.py`), `--rounds` rounds on `higgs_like` (`--rows`) with
   `CudaKernel.launch` wrapped by a clock: launches a tree, host milliseconds a tree inside
   `CudaKernel.launch`, and the steady ms/round (median interval between round ends from round
   3 on; the clock's own cost, about 0.2 us a launch, included).

Compare packages by running this script with each first on PYTHONPATH, alternating processes
(`docs/gpu.md`: processes differ).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SPEC = (("int64", 3), "float64", "float64", ("int64", 2), ("float64", 2), ("int64", 1),
        ("uint8", 2), ("float64", 1), "boolean", ("int64", 1), ("float64", 2), ("float64", 2),
        ("float64", 3), ("float64", 2), ("int32", 1))


def _kernel():
    from numba import cuda

    @cuda.jit
    def fifteen(pool, gs, hs, nodes, totals, offsets, masks, reg, flag, cons, lower, upper,
                records, out, done):
        if cuda.grid(1) == 0:
            done[0] += 1
    return fifteen


def _args(torch, dev) -> tuple:
    def z(*shape, dtype=torch.float64):
        return torch.zeros(shape, dtype=dtype, device=dev)
    i64 = torch.int64
    return (z(64, 28, 2, dtype=i64), 0.5, 0.25, z(8, 2, dtype=i64), z(8, 3), z(29, dtype=i64),
            z(8, 28, dtype=torch.uint8), z(4), False, z(28, dtype=i64), z(8, 28), z(8, 28),
            z(8, 28, 10), z(17, 10), z(8, dtype=torch.int32))


def _per_launch_us(torch, fn, launches: int, batch: int = 100) -> float:
    """Median host microseconds per call of fn over batches of `batch` calls."""
    for _ in range(batch):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(max(1, launches // batch)):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
        torch.cuda.synchronize()
    return 1e6 * float(np.median(times))


def micro(launches: int) -> dict:
    import torch
    from cuda.bindings import driver
    from cuda.core import LaunchConfig, Stream, launch

    from histboost.kernels.launch import CudaKernel, flatten_args, numba_signature
    dev = torch.device("cuda", 0)
    dispatcher = _kernel()
    kernel = CudaKernel(dispatcher, SPEC)
    args = _args(torch, dev)
    kernel.launch(1, 32, dev, *args)
    torch.cuda.synchronize()
    done = args[-1]
    compiled = dispatcher.compile(numba_signature(SPEC))
    cufunc = compiled._codelibrary.get_cufunc()
    flat = flatten_args("fifteen", SPEC, args, dev)
    handle = torch.cuda.current_stream(0).cuda_stream
    stream, config = Stream.from_handle(handle), LaunchConfig(grid=1, block=32)
    # (c)'s buffer: one 8-byte slot a parameter, a scalar at the start of its slot
    values = (ctypes.c_int64 * len(flat))()
    for k, p in enumerate(flat):
        if isinstance(p, bool):
            ctypes.c_bool.from_buffer(values, 8 * k).value = p
        elif isinstance(p, int):
            values[k] = p
        else:
            ctypes.memmove(ctypes.addressof(values) + 8 * k, ctypes.addressof(p),
                           ctypes.sizeof(p))
    base = ctypes.addressof(values)
    addresses = (ctypes.c_void_p * len(flat))(*range(base, base + 8 * len(flat), 8))
    address, fn_handle = ctypes.addressof(addresses), int(cufunc.handle)
    cu_launch = driver.cuLaunchKernel
    x = torch.zeros(1, device=dev)
    view_of = args[0]
    rest = args[1:]

    def a():
        kernel.launch(1, 32, dev, *args)

    def a_new_view():
        kernel.launch(1, 32, dev, view_of.view(64, 28, 2), *rest)

    def b():
        launch(stream, config, cufunc.kernel, *flat)

    def c():
        cu_launch(fn_handle, 1, 1, 1, 32, 1, 1, 0, handle, address, 0)

    rows = {"(a) CudaKernel.launch": a, "(a') CudaKernel.launch, a new view a launch": a_new_view,
            "(b) cuda.core.launch, flattened once": b,
            "(c) cuLaunchKernel, packed once": c,
            "(d) torch add_ (1 element)": lambda: x.add_(1.0),
            "(v) a view alone": lambda: view_of.view(64, 28, 2),
            "(f) flatten_args alone (kept tensors)":
                lambda: flatten_args("fifteen", SPEC, args, dev),
            "(s1) torch.cuda.current_stream(0).cuda_stream":
                lambda: torch.cuda.current_stream(0).cuda_stream}
    if hasattr(torch._C, "_cuda_getCurrentRawStream"):
        rows["(s2) torch._C._cuda_getCurrentRawStream(0)"] = (
            lambda: torch._C._cuda_getCurrentRawStream(0))
    before = int(done.item())
    out = {}
    for _ in range(2):  # the second pass is kept
        for name, fn in rows.items():
            out[name] = round(_per_launch_us(torch, fn, launches), 3)
    torch.cuda.synchronize()
    # every kernel launch of the rows above ran (the kernel counts them)
    launched = int(done.item()) - before
    out["kernel launches counted / made"] = f"{launched} / {_made(launches, 4 * 2)}"
    return out


def _made(launches: int, rows: int) -> int:
    batch = 100
    return rows * (batch + max(1, launches // batch) * batch)


def trees(rows: int, rounds: int) -> dict:
    import torch
    from _common import round_stamps, synth

    import histboost
    from histboost.kernels import launch
    X, y = synth().higgs_like(rows, seed=0)
    clock = {"on": False, "n": 0, "s": 0.0, "names": Counter()}
    plain = launch.CudaKernel.launch

    def timed(kernel, *a, **k):
        if not clock["on"]:
            return plain(kernel, *a, **k)
        t0 = time.perf_counter()
        try:
            return plain(kernel, *a, **k)
        finally:
            clock["s"] += time.perf_counter() - t0
            clock["n"] += 1
            clock["names"][kernel.name] += 1
    launch.CudaKernel.launch = timed
    base = {"objective": "binary:logistic", "learning_rate": 0.1, "max_bin": 256,
            "device": "cuda"}
    policies = {"depthwise": {"grow_policy": "depthwise", "max_depth": 8},
                "lossguide": {"grow_policy": "lossguide", "max_leaves": 255, "max_depth": 0}}
    warm = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=256)
    for p in policies.values():
        histboost.train({**base, **p}, warm, 2, verbose_eval=False)
    d = histboost.Dataset(X, label=y, max_bin=256).construct()
    out = {}
    for name, p in policies.items():
        histboost.train({**base, **p}, d, 2, verbose_eval=False)
        clock.update(on=True, n=0, s=0.0, names=Counter())
        stamps = round_stamps()
        histboost.train({**base, **p}, d, rounds, verbose_eval=False, callbacks=[stamps])
        torch.cuda.synchronize()
        clock["on"] = False
        out[name] = {"launches_a_tree": round(clock["n"] / rounds, 1),
                     "launch_ms_a_tree": round(1e3 * clock["s"] / rounds, 3),
                     "us_a_launch": round(1e6 * clock["s"] / max(1, clock["n"]), 2),
                     "steady_ms_round": round(1e3 * float(np.median(np.diff(stamps.t)[2:])), 3),
                     "kernels_a_tree": {k: round(v / rounds, 1)
                                        for k, v in clock["names"].most_common(12)}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--label", default="this package")
    ap.add_argument("--micro-only", action="store_true")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import histboost
    res = {"label": a.label, "package": str(Path(histboost.__file__).parent),
           "micro_us": micro(a.launches)}
    if not a.micro_only:
        res["trees"] = trees(a.rows, a.rounds)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    print(f"\n== {a.label} ({res['package']}): host us a launch (median of batches of 100)")
    print("| launch path | us |\n|---|---|")
    for k, v in res["micro_us"].items():
        print(f"| {k} | {v} |")
    if "trees" in res:
        print(f"\n== {a.label}: {a.rounds} rounds on higgs_like {a.rows} rows")
        print("| policy | launches a tree | host ms a tree in launch | us a launch | "
              "steady ms/round |\n|---|---|---|---|---|")
        for name, r in res["trees"].items():
            print(f"| {name} | {r['launches_a_tree']} | {r['launch_ms_a_tree']} | "
                  f"{r['us_a_launch']} | {r['steady_ms_round']} |")
        for name, r in res["trees"].items():
            print(f"{name} kernels a tree: {json.dumps(r['kernels_a_tree'])}")


if __name__ == "__main__":
    main()
