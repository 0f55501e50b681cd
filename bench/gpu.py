"""GPU training benchmark: histboost device='cuda' against XGBoost device='cuda' (and CatBoost
task_type='GPU' when installed) on `higgs_like` data, in one run on one machine.

    python bench/gpu.py [--rows 10000000] [--test-rows 1000000] [--rounds 200]

First a correctness check on the GPU: quantised training on 200k rows gives the CPU engine's
model byte for byte (depthwise, lossguide, oblivious). Then every configuration trains in its
own subprocess on the same cached arrays, 256 bins, learning rate 0.1: depth 8 depthwise, and
255-leaf lossguide (no depth limit). The parent samples the GPU's used memory through NVML
while a worker runs, so "peak MB" is what each library took on the device, CUDA context
included. Reported: ingest s (histboost: binning + upload; XGBoost: QuantileDMatrix), ms per
round (training without ingest; for histboost also the steady rate, the median time between
the ends of rounds 3.., without the run's set-up and release), predict s for the test rows
from host memory, peak MB, test AUC; then the root histogram kernel's time against the memory
floor (bytes it must read once over the measured device copy bandwidth). Compilation is kept
out of the timings (a small warm-up training and prediction first, for every library).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from _common import auc, round_stamps, synth

CONFIGS = ("histboost-depthwise", "histboost-depthwise-quantized", "histboost-lossguide",
           "xgboost-depthwise", "xgboost-lossguide", "catboost-depthwise", "histboost-root")


def _load(data: str):
    return (np.load(f"{data}/X.npy", mmap_mode="r"), np.load(f"{data}/y.npy"),
            np.load(f"{data}/Xt.npy"), np.load(f"{data}/yt.npy"))


def _policy(cfg: str, a: argparse.Namespace) -> dict:
    if "lossguide" in cfg:
        return {"grow_policy": "lossguide", "max_leaves": a.leaves, "max_depth": 0}
    return {"grow_policy": "depthwise", "max_depth": a.depth}


def _histboost(cfg: str, a: argparse.Namespace, data: str) -> dict:
    import histboost
    X, y, Xt, yt = _load(data)
    X = np.ascontiguousarray(X)
    params = {"objective": "binary:logistic", "learning_rate": 0.1, "max_bin": a.bins,
              "device": "cuda", "quantized_grad": cfg.endswith("quantized"), **_policy(cfg, a)}
    warm = histboost.Dataset(X[:20_000], label=y[:20_000], max_bin=a.bins)
    histboost.train({**params, "subsample": 0.5}, warm, 2, verbose_eval=False)
    histboost.train(params, warm, 2, verbose_eval=False).predict(Xt[:1000])
    stamps = round_stamps()
    t0 = time.perf_counter()
    d = histboost.Dataset(X, label=y, max_bin=a.bins)
    booster = histboost.train(params, d, a.rounds, verbose_eval=False, callbacks=[stamps])
    total = time.perf_counter() - t0
    ingest = booster.timings["binning"]
    t0 = time.perf_counter()
    p = booster.predict(Xt)
    predict = time.perf_counter() - t0
    # ms_round: the whole run less ingest, over the rounds (set-up and release included, as
    # for the peers); steady: the median time between the ends of rounds 3.. (no set-up)
    steady = float(np.median(np.diff(stamps.t)[2:])) if len(stamps.t) > 3 else float("nan")
    out = {"ingest_s": ingest, "ms_round": 1e3 * (total - ingest) / a.rounds,
           "ms_round_steady": 1e3 * steady, "predict_s": predict, "auc": auc(yt, p)}
    # where the time goes: 20 rounds with device-synchronised phase timers
    phases = histboost.train({**params, "verbosity": 2}, d, 20, verbose_eval=False).timings
    out["ms_round_by_phase"] = {k: round(1e3 * v / 20, 2) for k, v in phases.items()
                                if k != "binning"}
    return out


def _histboost_root(cfg: str, a: argparse.Namespace, data: str) -> dict:
    """The root histogram kernel alone (its own worker: its buffers stay out of the peak
    memory of the training runs)."""
    import histboost
    X, y, _, _ = _load(data)
    d = histboost.Dataset(np.ascontiguousarray(X), label=y, max_bin=a.bins).construct()
    return _root_histogram(d, a)


def _time_ms(fn, reps: int = 20) -> float:
    """Median device time of fn() over reps calls (the first two dropped), each call between
    two events: the host's work of the call (for a histogram build: its node table, upload
    and launch) is inside, the device idling while the host prepares the launch."""
    import torch
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    times = []
    for _ in range(reps):
        ev[0].record()
        fn()
        ev[1].record()
        torch.cuda.synchronize()
        times.append(ev[0].elapsed_time(ev[1]))
    return float(np.median(times[2:]))


def _queued_ms(fn, reps: int = 20, samples: int = 3) -> float:
    """Device time a call of fn() with calls queued back to back: reps calls between two
    events, so the host prepares the next launch while the device runs the last one (the
    kernel's own time plus its small upload); the median of `samples` such runs."""
    import torch
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    fn()
    times = []
    for _ in range(samples):
        torch.cuda.synchronize()
        ev[0].record()
        for _ in range(reps):
            fn()
        ev[1].record()
        torch.cuda.synchronize()
        times.append(ev[0].elapsed_time(ev[1]) / reps)
    return float(np.median(times))


def _exact(be, d, hist, rows=None) -> bool:
    """The histogram equals NumPy's per-feature sums of the backend's integer pairs over
    `rows` (None: all)."""
    pairs = be._ints.cpu().numpy().astype(np.float64)  # exact: integer sums below 2**53
    bins = d.bins if rows is None else d.bins[rows]
    if rows is not None:
        pairs = pairs[rows]
    offsets = d.bin_mapper.bin_offsets
    got = hist[0].cpu().numpy()
    for f in range(d.bins.shape[1]):
        lo, hi = int(offsets[f]), int(offsets[f + 1])
        for ch in range(2):
            want = np.bincount(bins[:, f], weights=pairs[:, ch], minlength=hi - lo)
            if not np.array_equal(want, got[lo:hi, ch]):
                return False
    return True


def _root_histogram(d, a: argparse.Namespace) -> dict:
    """Time of the root histogram kernel, and the memory floor: the bytes it must read once
    (bins, integer pairs) over the measured copy bandwidth; the root's histogram checked
    against NumPy. The kernel's time is the device time of a build with builds queued back
    to back (`_queued_ms`); `root_with_host_ms` is a build between two events with the host's
    work of the call inside (the figure of sessions 6-9). Then a sweep of the kernel's launch
    (threads per block, blocks per call, shared memory per block: 48 KiB takes two feature
    groups at 28 x 256 bins), each checked to give the same histogram, the root read through
    the row-index buffer (as every deeper node is), and an eighth of the rows at random
    through it (a node three levels down, where a depth-wise tree spends most of its
    histogram time: ms and ns a row)."""
    import torch

    from histboost.kernels.backend import make_backend
    from histboost.kernels.cuda.histogram import HIST_THREADS
    from histboost.tree.quantize import make_quantisation
    be = make_backend("cuda", d.bins, d.bin_mapper.bin_offsets, n_threads=1, label=d.label,
                      weight=None, n_outputs=1, count_rows=False)
    be.compute_gradients("logistic")
    quant = make_quantisation(*be.gradient_bounds(0), 8, 1)

    def node(rows=None, queued=True):
        be.begin_tree(0, rows, quant)
        return (_queued_ms if queued else _time_ms)(lambda: be.build_histograms([0]))

    def root():
        be.begin_tree(0, None, quant)
        return be.build_histograms([0])

    kernel_ms = node()
    with_host_ms = node(queued=False)
    want = root().clone()
    n, f = d.bins.shape
    read = n * f * d.bins.itemsize + n * 8
    buf = torch.empty(1 << 28, dtype=torch.float32, device="cuda")  # 1 GiB
    dst = torch.empty_like(buf)
    bandwidth = 2 * buf.numel() * 4 / (_time_ms(lambda b=buf, o=dst: o.copy_(b), 6) * 1e-3)
    del buf, dst
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sweep = {}
    for threads, blocks, shared in ((512, 3, None), (512, 6, None), (512, 12, None),
                                    (256, 6, None), (512, 3, 48 << 10)):
        name = f"threads={threads} blocks/SM={blocks} shared={shared or 'max'}"
        try:
            be._set_histogram_launch(threads, shared, blocks * sms)
            ms = node()
            sweep[name] = (ms, bool(torch.equal(root(), want)))
        except Exception as e:  # a launch the device refuses
            print(f"{name}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    be._set_histogram_launch(HIST_THREADS, None, None)
    eighth = np.sort(np.random.default_rng(0).choice(n, n // 8, replace=False))
    eighth_ms = node(eighth)
    be.begin_tree(0, eighth, quant)
    eighth_exact = _exact(be, d, be.build_histograms([0]).clone(), eighth)
    return {"root_ms": kernel_ms, "root_with_host_ms": with_host_ms,
            "floor_ms": 1e3 * read / bandwidth,
            "copy_GBs": bandwidth / 1e9, "exact": _exact(be, d, want),
            "eighth_exact": eighth_exact, "sweep": sweep,
            "root_via_rows_ms": node(np.arange(n)), "eighth_ms": eighth_ms,
            "eighth_ns_row": 1e6 * eighth_ms / len(eighth)}


def _xgboost(cfg: str, a: argparse.Namespace, data: str) -> dict:
    import xgboost as xgb
    X, y, Xt, yt = _load(data)
    X = np.ascontiguousarray(X)
    params = {"objective": "binary:logistic", "eta": 0.1, "max_bin": a.bins,
              "device": "cuda", "tree_method": "hist", **_policy(cfg, a)}
    warm = xgb.QuantileDMatrix(X[:20_000], label=y[:20_000], max_bin=a.bins)
    xgb.train(params, warm, 2).inplace_predict(Xt[:1000])
    t0 = time.perf_counter()
    d = xgb.QuantileDMatrix(X, label=y, max_bin=a.bins)
    ingest = time.perf_counter() - t0
    t0 = time.perf_counter()
    booster = xgb.train(params, d, a.rounds)
    booster.predict(xgb.DMatrix(X[:10]))  # training is asynchronous until used
    train = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = booster.inplace_predict(Xt)
    predict = time.perf_counter() - t0
    return {"ingest_s": ingest, "ms_round": 1e3 * train / a.rounds, "predict_s": predict,
            "auc": auc(yt, np.asarray(p)), "version": xgb.__version__}


def _catboost(cfg: str, a: argparse.Namespace, data: str) -> dict:
    import catboost
    X, y, Xt, yt = _load(data)
    X = np.ascontiguousarray(X)
    t0 = time.perf_counter()
    pool = catboost.Pool(X, label=y)
    ingest = time.perf_counter() - t0
    model = catboost.CatBoostClassifier(iterations=a.rounds, depth=a.depth, learning_rate=0.1,
                                        border_count=a.bins - 1, task_type="GPU", verbose=0)
    t0 = time.perf_counter()
    model.fit(pool)
    train = time.perf_counter() - t0
    t0 = time.perf_counter()
    p = model.predict_proba(Xt)[:, 1]
    predict = time.perf_counter() - t0
    return {"ingest_s": ingest, "ms_round": 1e3 * train / a.rounds, "predict_s": predict,
            "auc": auc(yt, p), "version": catboost.__version__}


def worker(cfg: str, a: argparse.Namespace, data: str) -> dict:
    if cfg == "histboost-root":
        return _histboost_root(cfg, a, data)
    lib = cfg.split("-")[0]
    return {"histboost": _histboost, "xgboost": _xgboost, "catboost": _catboost}[lib](
        cfg, a, data)


class _MemorySampler:
    """Samples the GPU's used memory (NVML) every 5 ms in a thread; peak - baseline."""

    def __init__(self) -> None:
        import pynvml
        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.base = self._used()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _used(self) -> int:
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._used())
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def check_correctness(a: argparse.Namespace) -> None:
    """Quantised GPU training equals the CPU engine's, byte for byte, on 200k rows."""
    import histboost
    X, y = synth().higgs_like(200_000, seed=a.seed + 7)
    for policy in ({"grow_policy": "depthwise", "max_depth": 8},
                   # 127 leaves: the first six levels planned on the device
                   {"grow_policy": "lossguide", "max_leaves": 127, "max_depth": 0},
                   {"grow_policy": "oblivious", "max_depth": 6}):
        p = {"objective": "binary:logistic", "quantized_grad": True, "learning_rate": 0.1,
             **policy}
        raw = []
        for dev in ("cpu", "cuda"):
            b = histboost.train({**p, "device": dev}, histboost.Dataset(X, label=y), 20,
                                verbose_eval=False)
            raw.append(b.save_raw().replace(f'"device":"{dev}"'.encode(), b""))
        same = raw[0] == raw[1]
        print(f"correctness {policy['grow_policy']}: GPU model "
              f"{'==' if same else '!='} CPU model", flush=True)
        if not same:
            raise SystemExit("the GPU engine's quantised model differs from the CPU engine's")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--test-rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=255)
    ap.add_argument("--bins", type=int, default=256)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default="/tmp/histboost-gpu-bench")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker, a, a.data_dir)), flush=True)
        return
    if not a.skip_check:
        check_correctness(a)
    data = Path(a.data_dir) / f"{a.rows}-{a.test_rows}-{a.seed}"
    if not (data / "yt.npy").exists():
        data.mkdir(parents=True, exist_ok=True)
        X, y = synth().higgs_like(a.rows + a.test_rows, seed=a.seed)
        np.save(data / "X.npy", X[:a.rows])
        np.save(data / "y.npy", y[:a.rows])
        np.save(data / "Xt.npy", X[a.rows:])
        np.save(data / "yt.npy", y[a.rows:])
        del X, y
    results = {}
    for cfg in a.configs.split(","):
        args = [sys.executable, __file__, "--worker", cfg, "--data-dir", str(data)]
        args += [f"--{k}={getattr(a, k)}" for k in ("rounds", "depth", "leaves", "bins")]
        with _MemorySampler() as mem:
            res = subprocess.run(args, capture_output=True, text=True)
        line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
        if res.returncode != 0 or not line:
            print(f"{cfg}: failed\n{res.stdout[-1500:]}\n{res.stderr[-3000:]}", flush=True)
            continue
        r = json.loads(line[0][7:])
        r["peak_MB"] = (mem.peak - mem.base) / 2**20
        results[cfg] = r
        print(f"{cfg}: {json.dumps(r)}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    xgb = {k.split("-")[1]: v for k, v in results.items() if k.startswith("xgboost")}
    print(f"\nhiggs_like {a.rows:,} x 28 train, {a.test_rows:,} test, {a.rounds} rounds, "
          f"{a.bins} bins; depthwise depth {a.depth}, lossguide {a.leaves} leaves")
    print("| config | ingest s | ms/round | vs xgboost | steady ms/round | predict s | peak MB "
          "| test AUC |")
    print("|---|---|---|---|---|---|---|---|")
    for cfg, r in results.items():
        if "ms_round" not in r:
            continue
        ref = xgb.get(cfg.split("-")[1])
        ratio = f"{r['ms_round'] / ref['ms_round']:.2f}" if ref else "-"
        steady = f"{r['ms_round_steady']:.1f}" if "ms_round_steady" in r else "-"
        print(f"| {cfg} | {r['ingest_s']:.2f} | {r['ms_round']:.1f} | {ratio} | {steady} | "
              f"{r['predict_s']:.2f} | {r['peak_MB']:.0f} | {r['auc']:.4f} |")
    q = results.get("histboost-root", {})
    if "root_ms" in q:
        print(f"\nroot histogram: {q['root_ms']:.3f} ms, memory floor {q['floor_ms']:.3f} ms "
              f"({q['root_ms'] / q['floor_ms']:.2f}x; copy {q['copy_GBs']:.0f} GB/s); "
              f"{'equal to' if q['exact'] else 'DIFFERENT FROM'} NumPy's sums; a build "
              f"with the host's work between its events: {q['root_with_host_ms']:.3f} ms")
        print(f"root read through the row-index buffer: {q['root_via_rows_ms']:.3f} ms; an "
              f"eighth of the rows at random: {q['eighth_ms']:.3f} ms "
              f"({q['eighth_ns_row']:.2f} ns a row; "
              f"{'equal to' if q['eighth_exact'] else 'DIFFERENT FROM'} NumPy's sums)")
        for name, (ms, same) in q["sweep"].items():
            print(f"  {name}: {ms:.3f} ms{'' if same else '  HISTOGRAM DIFFERS'}")


if __name__ == "__main__":
    main()
