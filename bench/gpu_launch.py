"""Host cost of a kernel launch by launch path (a CUDA device needed).

    python bench/gpu_launch.py [--launches 20000] [--graph-launches 121] [--label NAME]
        [--json PATH]

Host microseconds per launch of a one-block kernel taking the split search's mix of arguments
(12 arrays of 1-3 dimensions, 3 scalars: 15 arguments, 91 flattened parameters), in batches
of 100 launches (the host's time in the batch, the device synchronised between batches;
median over batches; the second of two passes) through
  (a) `CudaKernel.launch` of the histboost package first on PYTHONPATH, the same tensors
      every launch, and (a') one of them a new view every launch (the view's own cost
      included: row (v) alone);
  (b) `cuda.core.launch` with the parameters flattened once (Kernel, LaunchConfig and Stream
      made once);
  (c) the driver's `cuLaunchKernel` through `cuda.bindings` with a parameter buffer packed
      once (handle and stream read once);
  (d) a torch operator (`add_` of a scalar to a 1-element tensor), for scale;
the launcher's pieces alone: `flatten_args` on kept tensors (f), torch's current stream as a
`Stream` object (s1) and as a raw handle (s2); and (g) `--graph-launches` launches of (a)
captured once in a CUDA graph and replayed (host us per launch replayed; (g'): the capture
with its instantiation, per launch). The kernel counts its launches: the last row checks that
every launch made ran.

Compare packages by running this script with each first on PYTHONPATH, alternating processes
(`docs/gpu.md`: processes differ). The launches and host launch time of a tree come from
`bench/gpu_ab.py --launch-clock` (`LaunchClock` below), beside its ms/round.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
import traceback
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


def _per_call_us(torch, fn, calls: int, batch: int = 100) -> tuple[float, int]:
    """Median host microseconds per call of fn over batches of `batch` calls (one batch to
    warm up; the device synchronised between batches, outside the clock), and the calls
    made."""
    for _ in range(batch):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(max(1, calls // batch)):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
        torch.cuda.synchronize()
    return 1e6 * float(np.median(times)), batch * (1 + len(times))


def _graph(torch, launch_one, n: int) -> tuple[float, int, float]:
    """launch_one called n times (a planned tree's launches), captured once in a CUDA graph
    on a side stream, then the graph replayed on torch's stream: host us per replay and the
    replays made, and the median seconds of a capture with its instantiation (3 captures)."""
    side = torch.cuda.Stream()
    capture = []
    for _ in range(3):
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.cuda.stream(side):
            graph.capture_begin()
            try:
                for _ in range(n):
                    launch_one()
            finally:  # the stream leaves capture mode, whatever happened
                graph.capture_end()
        capture.append(time.perf_counter() - t0)
    us, calls = _per_call_us(torch, graph.replay, 10 * 20, batch=10)
    return us, calls, float(np.median(capture))


def micro(launches: int, graph_launches: int, out: dict) -> None:
    """Rows (a)-(g) of the module docstring into `out` (host us per call), as measured."""
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
        return cu_launch(fn_handle, 1, 1, 1, 32, 1, 1, 0, handle, address, 0)

    err, = c()
    assert not err, f"cuLaunchKernel: {err!r}"
    made = 1
    # rows: name -> (function, kernel launches a call)
    rows = {"(a) CudaKernel.launch": (a, 1),
            "(a') CudaKernel.launch, a new view a launch": (a_new_view, 1),
            "(b) cuda.core.launch, flattened once": (b, 1),
            "(c) cuLaunchKernel, packed once": (c, 1),
            "(d) torch add_ (1 element)": (lambda: x.add_(1.0), 0),
            "(v) a view alone": (lambda: view_of.view(64, 28, 2), 0),
            "(f) flatten_args alone (kept tensors)":
                (lambda: flatten_args("fifteen", SPEC, args, dev), 0),
            "(s1) torch.cuda.current_stream(0).cuda_stream":
                (lambda: torch.cuda.current_stream(0).cuda_stream, 0)}
    if hasattr(torch._C, "_cuda_getCurrentRawStream"):
        rows["(s2) torch._C._cuda_getCurrentRawStream(0)"] = (
            lambda: torch._C._cuda_getCurrentRawStream(0), 0)
    before = int(done[0].item()) - 1
    for _ in range(2):  # the second pass is kept
        for name, (fn, kernels) in rows.items():
            us, calls = _per_call_us(torch, fn, launches)
            out[name] = round(us, 3)
            made += kernels * calls
    try:
        us, calls, capture_s = _graph(torch, a, graph_launches)
        out[f"(g) CUDA graph of {graph_launches} launches, replayed (per launch)"] = round(
            us / graph_launches, 3)
        out["(g') capturing and instantiating that graph (per launch)"] = round(
            1e6 * capture_s / graph_launches, 3)
        made += graph_launches * calls
    except Exception as e:  # reported, the rows above kept
        out["(g) CUDA graph"] = f"failed: {e!r}"[:300]
    torch.cuda.synchronize()
    # every kernel launch above ran: the kernel counts its launches
    out["kernel launches counted / made"] = f"{int(done[0].item()) - before} / {made}"


class LaunchClock:
    """Counts the calls of `CudaKernel.launch` (of the histboost first on sys.path) and the
    host seconds spent in them, per kernel, while `on`: the method is wrapped (about 0.2 us a
    launch of its own); and, where the launcher packs parameters (`launch._Packed`), the
    launches that packed them afresh, per kernel. Used by `bench/gpu_ab.py --launch-clock`."""

    def __init__(self) -> None:
        from histboost.kernels import launch
        self.on = False
        self.launches = 0
        self.seconds = 0.0
        self.kernels: Counter = Counter()
        self.packed_kernels: Counter = Counter()  # fresh packs per kernel name
        self._current = ""  # the kernel being launched
        plain = launch.CudaKernel.launch
        clock = self

        def timed(kernel, *args, **kwargs):
            if not clock.on:
                return plain(kernel, *args, **kwargs)
            clock._current = kernel.name
            t0 = time.perf_counter()
            try:
                return plain(kernel, *args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - t0
                clock.launches += 1
                clock.kernels[kernel.name] += 1
        launch.CudaKernel.launch = timed
        self.packs: int | None = None
        packed = getattr(launch, "_Packed", None)
        if packed is not None:
            self.packs = 0
            plain_init = packed.__init__

            def counted(obj, *args, **kwargs):
                if clock.on:
                    clock.packs += 1
                    clock.packed_kernels[clock._current] += 1
                plain_init(obj, *args, **kwargs)
            packed.__init__ = counted

    def start(self) -> None:
        self.on, self.launches, self.seconds = True, 0, 0.0
        self.packs = None if self.packs is None else 0
        self.kernels.clear()
        self.packed_kernels.clear()

    def stop(self, trees: int) -> dict:
        """Launches a tree, host ms a tree in them, us a launch, launches a tree that packed
        their parameters afresh (None: a launcher without packing), and the kernels launched
        a tree (the most frequent 12) and the kernels packing afresh a tree (the most frequent
        8), over `trees` trees since `start`."""
        self.on = False
        return {"launches_a_tree": round(self.launches / trees, 1),
                "packs_a_tree": None if self.packs is None else round(self.packs / trees, 1),
                "launch_ms_a_tree": round(1e3 * self.seconds / trees, 3),
                "us_a_launch": round(1e6 * self.seconds / max(1, self.launches), 2),
                "kernels_a_tree": {k: round(v / trees, 1)
                                   for k, v in self.kernels.most_common(12)},
                "packs_by_kernel_a_tree": {k: round(v / trees, 2)
                                           for k, v in self.packed_kernels.most_common(8)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20_000)
    ap.add_argument("--graph-launches", type=int, default=121,
                    help="launches captured in row (g)'s CUDA graph")
    ap.add_argument("--label", default="this package")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    import histboost
    res = {"label": a.label, "package": str(Path(histboost.__file__).parent), "micro_us": {}}
    try:
        micro(a.launches, a.graph_launches, res["micro_us"])
    except Exception:  # the rows measured are still reported
        traceback.print_exc()
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    print(f"\n== {a.label} ({res['package']}): host us a launch (median of batches of 100)")
    print("| launch path | us |\n|---|---|")
    for k, v in res["micro_us"].items():
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
