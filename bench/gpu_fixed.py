"""The fixed costs of a GPU training run: where `bench/gpu.py`'s (train - ingest) / rounds
exceeds the steady time a round.

    python bench/gpu_fixed.py [--rows 10000000] [--rounds 200] [--quantised] [--runs 2]
        [--profile-rounds 4] [--policy depthwise|lossguide] [--leaves 255]
        [--cprofile-rounds 0]

One process, `bench/gpu.py`'s data (its cache, written here when missing) and its timed
training: the same warm-up, then `Dataset(X)` and `train()` under one clock. The boosting
loop's and the backend's functions are wrapped with host clocks (perf_counter at entry and
exit; nothing synchronised, so the run is the bench's), and the allocator's device
allocations (cudaMalloc, `num_device_alloc`) are read at every round's end. Printed per run:

- the run: whole, ingest ("binning"), the bench's ms/round, the steady median;
- before the first round and after the last: each wrapped call's time (the functions
  nest: inclusive times, indented by depth), what no wrapped call covers ("other");
- the rounds: the first rounds' and the last round's time, their excess over the steady
  median, the excess of all rounds, and per function the time in rounds 0-2 against its
  median a round over rounds 3.. (the functions whose first rounds cost more);
- the steady rounds (3..): per function, its median time a round inclusive and exclusive
  (less the wrapped functions it calls: where a lossguide round's host time goes), and its
  calls a round; each wrapped call adds about a microsecond of its own;
- the sum: outside the rounds + the rounds' excess = (train - ingest) - rounds x steady.
- the garbage collector's passes during the run (gc.callbacks: count and time per
  generation), a candidate for a round's one-off stall (one depth-wise round of 358 ms, session
  14).

`--policy lossguide` trains `bench/gpu.py`'s 255-leaf lossguide trees (`--leaves`) instead of
depth-wise ones. `--cprofile-rounds` then runs one more training under cProfile (its per-call
overhead inflates functions called thousands of times a tree, such as the grower's heap
pushes: compare with the clocks above).

Then `--profile-rounds` rounds (set-up and release included) under torch.profiler: the
CUDA runtime calls by host time (cudaMalloc, cudaFree, cudaHostAlloc, synchronisations).
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# (module, class or None, attribute) of the wrapped functions
WRAPPED = (
    ("histboost.data.dataset", "Dataset", "__init__"),
    ("histboost.data.dataset", "Dataset", "construct"),
    ("histboost.training", None, "_labels"),
    ("histboost.training", None, "_initial_booster"),
    ("histboost.training", None, "make_backend"),
    ("histboost.training", "_Training", "__init__"),
    ("histboost.training", "_Training", "boost_round"),
    ("histboost.training", "_Training", "evaluate"),
    ("histboost.training", "_Training", "release"),
    ("histboost.tree.grower", "TreeGrower", "__init__"),
    ("histboost.tree.grower", "TreeGrower", "grow"),
    ("histboost.booster", "Booster", "append_round"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "__init__"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_bin_on_device"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "set_margin"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "compute_gradients"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "gradient_bounds"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "begin_tree"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "build_histograms"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "plan_levels"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_launch_next_tree"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_gradients_ahead"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_grow_staging"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_alloc_slots"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_buffer"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "update_margin"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "split_and_search"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "apply_splits"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_answer_ahead"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_plan_best_first"),
    ("histboost.kernels.cuda.best_first", "BestFirstPlan", "launch"),
    ("histboost.kernels.cuda.best_first", "BestFirstPlan", "launch_leaves"),
    ("histboost.kernels.cuda.best_first", "BestFirstPlan", "step"),
    ("histboost.kernels.cuda.best_first", "BestFirstPlan", "finished"),
    ("histboost.kernels.cuda.best_first", "BestFirstPlan", "leaves_match"),
    ("histboost.kernels.cuda.ahead", "PinnedBlocks", "block"),
    ("histboost.kernels.cuda.ahead", "PinnedBlocks", "copy"),
    ("histboost.tree.grower", "TreeGrower", "_grow_lossguide"),
    ("histboost.tree.grower", "TreeGrower", "_finish"),
    ("histboost.tree.grower", "TreeGrower", "_commit_order"),
    ("histboost.tree.grower", "TreeGrower", "_split_ahead"),
    ("histboost.tree.grower", "TreeGrower", "_split_nodes"),
    ("histboost.tree.grower", "TreeGrower", "_apply_and_search"),
    ("histboost.tree.grower", "TreeGrower", "_node_masks"),
    ("histboost.tree.grower", "TreeGrower", "_planned_levels"),
    ("histboost.tree.grower", "_Nodes", "add_children"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_record_children"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_launch_build"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_bounds"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_take_next"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_gradients_of_spare"),
    ("histboost.kernels.cuda.ahead", "LevelPlan", "step"),
    ("histboost.kernels.launch", "CudaKernel", "packed"),
    ("histboost.kernels.launch", "CudaKernel", "_launch"),
    ("torch.cuda", "Event", "synchronize"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "release"),
    ("histboost.kernels.cuda.ahead", "LevelBuffers", "__init__"),
    ("histboost.kernels.cuda.ahead", "LevelPlan", "launch"),
    ("histboost.kernels.cuda.backend", "CUDABackend", "_upload"),
    ("histboost.kernels.launch", "CudaKernel", "launch"),
    ("torch", None, "zeros"),
    ("torch", None, "empty"),
    ("torch", None, "empty_like"),
    ("torch.cuda", None, "empty_cache"),
    ("torch.cuda", None, "synchronize"),
)


class Clock:
    """Host clocks around the WRAPPED functions: (name, depth, round, start, end) per call;
    the round is the last `_Training.boost_round`'s epoch (-1 before the first round)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, float, float]] = []
        self.round = -1
        self.depth = 0
        self.allocs: list[int] = []  # the allocator's cudaMalloc count at rounds' ends
        self.stats_seconds = 0.0  # spent reading it (taken off the later stamps)
        self._saved: list[tuple[object, str, object]] = []
        # exclusive times: name -> round -> seconds outside the wrapped calls it made
        self.own: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.inner: list[float] = []  # per open call, the time of the wrapped calls it made

    def install(self) -> None:
        for mod, cls, attr in WRAPPED:
            owner = importlib.import_module(mod)
            if cls is not None:
                owner = getattr(owner, cls)
            name = f"{cls}.{attr}" if cls else attr
            raw = owner.__dict__.get(attr) if cls is not None else None
            if isinstance(raw, staticmethod):  # wrapped as a static method again
                self._saved.append((owner, attr, raw))
                setattr(owner, attr, staticmethod(self._wrap(raw.__func__, name)))
                continue
            fn = getattr(owner, attr)
            self._saved.append((owner, attr, fn))
            setattr(owner, attr, self._wrap(fn, name))

    def uninstall(self) -> None:
        for owner, attr, fn in reversed(self._saved):
            setattr(owner, attr, fn)
        self._saved.clear()

    def _wrap(self, fn, name: str):
        clock = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if name == "_Training.boost_round":
                clock.round = int(args[1] if len(args) > 1 else kwargs["epoch"])
            depth, rnd = clock.depth, clock.round
            clock.depth += 1
            clock.inner.append(0.0)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                t1 = time.perf_counter()
                clock.calls.append((name, depth, rnd, t0, t1))
                own = t1 - t0 - clock.inner.pop()
                clock.own[name][rnd] += own
                if clock.inner:
                    clock.inner[-1] += t1 - t0
                clock.depth -= 1

        return timed

    def round_ended(self, epoch: int, last: bool) -> None:
        """The allocator's cudaMalloc count after rounds 0-5 and the last (reading the
        allocator's statistics costs more than a launch: not every round)."""
        import torch
        if (epoch < 6 or last) and torch.cuda.is_available():
            t0 = time.perf_counter()
            self.allocs.append(int(torch.cuda.memory_stats().get("num_device_alloc", -1)))
            self.stats_seconds += time.perf_counter() - t0


class GCClock:
    """The garbage collector's passes during a run (gc.callbacks): count and seconds per
    generation."""

    def __init__(self) -> None:
        self.seconds: dict[int, list[float]] = defaultdict(list)
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds[info["generation"]].append(time.perf_counter() - self._t0)

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)

    def summary(self) -> str:
        return ", ".join(f"generation {g}: {len(v)} passes, {1e3 * sum(v):.1f} ms (longest "
                         f"{1e3 * max(v):.1f})" for g, v in sorted(self.seconds.items())) \
            or "no passes"


def _stamps(clock: Clock, rounds: int):
    from histboost.callback import TrainingCallback

    class Stamps(TrainingCallback):
        def __init__(self) -> None:
            self.t: list[float] = []

        def after_iteration(self, model, epoch, log) -> bool:
            self.t.append(time.perf_counter() - clock.stats_seconds)
            clock.round_ended(epoch, epoch == rounds - 1)
            return False

    return Stamps()


def _outside(clock: Clock, lo: float, hi: float, what: str) -> float:
    """Print the wrapped calls in [lo, hi) outside the rounds, nested; returns hi - lo."""
    calls = sorted((c for c in clock.calls if lo <= c[3] < hi), key=lambda c: c[3])
    print(f"  {what}: {1e3 * (hi - lo):.1f} ms")
    covered = 0.0
    agg: dict[tuple[int, str], list[float]] = defaultdict(list)
    order: list[tuple[int, str]] = []
    for name, depth, _, t0, t1 in calls:
        key = (depth, name)
        if key not in agg:
            order.append(key)
        agg[key].append(t1 - t0)
        if depth == calls[0][1]:
            covered += t1 - t0
    for depth, name in order:
        v = agg[(depth, name)]
        print(f"    {'  ' * depth}{name}: {1e3 * sum(v):.2f} ms ({len(v)} calls)")
    print(f"    other (no wrapped call): {1e3 * (hi - lo - covered):.2f} ms")
    return hi - lo


def one_run(histboost, X, y, params: dict, rounds: int) -> dict:
    import torch
    clock = Clock()
    stamps = _stamps(clock, rounds)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    clock.install()
    try:
        with GCClock() as gcc:
            t0 = time.perf_counter()
            d = histboost.Dataset(X, label=y, max_bin=params["max_bin"])
            booster = histboost.train(params, d, rounds, verbose_eval=False,
                                      callbacks=[stamps])
            t_end = time.perf_counter() - clock.stats_seconds
        print(f"\ngarbage collector during the run: {gcc.summary()}")
    finally:
        clock.uninstall()
    total = t_end - t0
    ingest = booster.timings["binning"]
    t = np.asarray(stamps.t)
    steady = float(np.median(np.diff(t)[2:]))
    first = min(c[3] for c in clock.calls if c[0] == "_Training.boost_round")
    rounds_t = np.diff(np.concatenate([[first], t]))
    print(f"\nrun: {1e3 * total:.1f} ms, ingest {1e3 * ingest:.1f} ms, (train - ingest) / "
          f"rounds {1e3 * (total - ingest) / rounds:.3f} ms, steady {1e3 * steady:.3f} ms")
    before = _outside(clock, t0, first, "before the first round (ingest included)")
    after = _outside(clock, t[-1], t_end, "after the last round's end")
    excess = rounds_t - steady
    print(f"  rounds: first five {np.round(1e3 * rounds_t[:5], 2).tolist()} ms, last "
          f"{1e3 * rounds_t[-1]:.2f} ms; excess over steady: first three "
          f"{1e3 * excess[:3].sum():.1f} ms, all rounds {1e3 * excess.sum():.1f} ms")
    if clock.allocs:
        a = clock.allocs
        print(f"  cudaMalloc calls (the allocator's count): {a[0]} up to round 0's end, then "
              f"rounds 1-5: {np.diff(a[:6]).tolist()}, rounds 6..: {a[-1] - a[min(5, len(a) - 1)]}"
              f" (reading them: {1e3 * clock.stats_seconds:.2f} ms, taken off the clock)")
    per: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for name, _, rnd, t0_, t1_ in clock.calls:
        if rnd >= 0:
            per[name][rnd] += t1_ - t0_
    print("  per function, ms: rounds 0, 1, 2 | median of rounds 3.. | excess of rounds 0-2")
    for name, by in sorted(per.items(), key=lambda kv: -sum(
            kv[1].get(r, 0.0) for r in range(3))):
        later = [by.get(r, 0.0) for r in range(3, rounds)]
        med = float(np.median(later)) if later else 0.0
        ex = sum(by.get(r, 0.0) - med for r in range(3))
        if abs(ex) > 2e-4 or name == "_Training.boost_round":
            print(f"    {name}: {', '.join(f'{1e3 * by.get(r, 0.0):.2f}' for r in range(3))}"
                  f" | {1e3 * med:.2f} | {1e3 * ex:.2f}")
    print("  steady rounds (3..), per function: median ms a round inclusive (nested "
          "functions count in their callers too), median ms a round exclusive (outside the "
          "wrapped functions it calls), calls a round")
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for name, _, rnd, _, _ in clock.calls:
        if rnd >= 0:
            counts[name][rnd] += 1
    steady_rows = []
    for name, by in per.items():
        later = [by.get(r, 0.0) for r in range(3, rounds)]
        if later:
            n_calls = float(np.median([counts[name].get(r, 0) for r in range(3, rounds)]))
            own = float(np.median([clock.own[name].get(r, 0.0) for r in range(3, rounds)]))
            steady_rows.append((float(np.median(later)), name, own, n_calls))
    for med, name, own, n_calls in sorted(steady_rows, reverse=True):
        if med > 5e-5:
            print(f"    {name}: {1e3 * med:.3f} ms, own {1e3 * own:.3f} ms, {n_calls:g} calls")
    fixed = (total - ingest) - rounds * steady
    print(f"  (train - ingest) - rounds x steady = {1e3 * fixed:.1f} ms: outside the rounds "
          f"{1e3 * (before + after - ingest):.1f} ms (ingest left out), the rounds' excess "
          f"{1e3 * excess.sum():.1f} ms")
    return {"ms_round": 1e3 * (total - ingest) / rounds, "steady": 1e3 * steady,
            "before_ms": 1e3 * (before - ingest), "after_ms": 1e3 * after,
            "excess_ms": 1e3 * float(excess.sum()), "fixed_ms": 1e3 * fixed}


def profile_run(histboost, X, y, params: dict, rounds: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        d = histboost.Dataset(X, label=y, max_bin=params["max_bin"])
        histboost.train(params, d, rounds, verbose_eval=False)
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.key.startswith("cuda")
            and not e.key.startswith("cudaLaunch")]
    rows.sort(key=lambda e: -e.self_cpu_time_total)
    print(f"\nCUDA runtime calls of a {rounds}-round training (set-up and release "
          "included), host time under torch.profiler:")
    for e in rows[:14]:
        print(f"  {e.key}: {e.self_cpu_time_total / 1e3:.2f} ms ({e.count} calls)")


def cprofile_run(histboost, X, y, params: dict, rounds: int, top: int = 45) -> None:
    """One training under cProfile (its Python functions' host time; C calls such as
    cuLaunchKernel and event waits are their own rows): the top `top` by own time, then by
    cumulative time."""
    import cProfile
    import io
    import pstats
    d = histboost.Dataset(X, label=y, max_bin=params["max_bin"])
    prof = cProfile.Profile()
    prof.enable()
    histboost.train(params, d, rounds, verbose_eval=False)
    prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(top)
        print(f"\ncProfile of a {rounds}-round training by {key}:")
        print("\n".join(line[:160] for line in buf.getvalue().splitlines()[6:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--test-rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--bins", type=int, default=256)
    ap.add_argument("--quantised", action="store_true")
    ap.add_argument("--policy", choices=("depthwise", "lossguide"), default="depthwise")
    ap.add_argument("--leaves", type=int, default=255, help="lossguide's max_leaves")
    ap.add_argument("--cprofile-rounds", type=int, default=0,
                    help="then one training of this many rounds under cProfile")
    ap.add_argument("--profile-rounds", type=int, default=4)
    ap.add_argument("--data-dir", default="/tmp/histboost-gpu-bench")
    a = ap.parse_args()
    from gpu_ab import _data

    import histboost
    data = _data(a)
    X = np.ascontiguousarray(np.load(data / "X.npy"))
    y = np.load(data / "y.npy")
    params = {"objective": "binary:logistic", "learning_rate": 0.1, "max_bin": a.bins,
              "device": "cuda", "quantized_grad": a.quantised,
              **({"grow_policy": "depthwise", "max_depth": a.depth} if a.policy == "depthwise"
                 else {"grow_policy": "lossguide", "max_leaves": a.leaves, "max_depth": 0})}
    warm = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=a.bins)  # as bench/gpu.py
    histboost.train({**params, "subsample": 0.5}, warm, 2, verbose_eval=False)
    histboost.train(params, warm, 2, verbose_eval=False)
    shape = f"depth-{a.depth} depth-wise" if a.policy == "depthwise" else \
        f"{a.leaves}-leaf lossguide"
    print(f"{'quantised' if a.quantised else 'float'} {shape}, {a.rows:,} "
          f"rows, {a.rounds} rounds, {a.bins} bins")
    results = [one_run(histboost, X, y, params, a.rounds) for _ in range(a.runs)]
    if a.profile_rounds:
        profile_run(histboost, X, y, params, a.profile_rounds)
    if a.cprofile_rounds:
        cprofile_run(histboost, X, y, params, a.cprofile_rounds)
    print("\n| run | ms/round | steady | before the rounds (ingest out) | after | rounds' "
          "excess | fixed in all |\n|---|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        print(f"| {i} | {r['ms_round']:.3f} | {r['steady']:.3f} | {r['before_ms']:.1f} | "
              f"{r['after_ms']:.1f} | {r['excess_ms']:.1f} | {r['fixed_ms']:.1f} |")


if __name__ == "__main__":
    main()
