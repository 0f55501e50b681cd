"""First-run benchmark: `examples/train_higgs.py` in fresh processes sharing one empty
``NUMBA_CACHE_DIR``: the first run compiles every kernel it uses (cold), the next ones load them
from the cache (warm).

    python bench/cold_start.py [--runs 3] [--warm 2] [--compare /path/to/other/checkout]
                               [--bytecode]
    python bench/cold_start.py --profile [--runs 3] [--compare /path/to/other/checkout]

Prints, for each process (interpreter start to exit), the wall-clock seconds and the CPU
seconds (user + system, all threads), then the medians of the cold and of the warm runs. Each
cold run gets a cache directory of its own. On a machine shared with other work the CPU seconds
are the steadier figure: the wall time includes waiting for a core. ``--compare DIR`` runs
another checkout's histboost (its own `examples/train_higgs.py`) in turns with this one's.
``--bytecode`` writes the checkouts' Python bytecode (`compileall`) before the runs and lets
them read it, as an installed package's is (pip compiles it at install): with
``PYTHONDONTWRITEBYTECODE`` set, as in the development shell, every process otherwise compiles
histboost's modules from source (about 0.15 s CPU of each run).

``--profile`` says where a cold and a warm run's seconds go: the process's CPU seconds split
into `import histboost`, Numba's one-time set-up of its CPU target (the first kernel call of a
process, cold or warm), compiling, cache reads and writes and the rest (the example's Python,
NumPy and the kernels' own run time); then every function Numba compiled (kernels, their
callees, Numba's own overloads), each one's signatures and its exclusive CPU seconds (its
callees' compile counted under the callee), and the warm run's cache reads per kernel. Medians
over the runs. The figures come from hooks on Numba's `Dispatcher.compile` and its cache's
`load_overload` / `save_overload` (one process-wide stack, so nested compiles are exclusive).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env(root: Path, cache_dir: str) -> dict[str, str]:
    return {**os.environ, "NUMBA_CACHE_DIR": cache_dir,
            "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _compile_bytecode(root: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "histboost"),
                    str(root / "examples")], check=True)


def run(cache_dir: str, root: Path = ROOT) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of the example with NUMBA_CACHE_DIR=cache_dir."""
    before = _cpu()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(root / "examples" / "train_higgs.py")],
                   env=_env(root, cache_dir), check=True, capture_output=True)
    return time.perf_counter() - t0, _cpu() - before


def _fmt(runs: list[tuple[float, float]]) -> str:
    return " ".join(f"{w:.2f}s ({c:.2f})" for w, c in runs)


# --- --profile: the child process -------------------------------------------------------------

def _child_profile(out: str, example: str) -> None:
    """Runs `example` in this process under hooks that time every Numba compile, cache read and
    cache write, and writes the records to `out` (JSON) at exit."""
    import atexit  # noqa: PLC0415
    import runpy  # noqa: PLC0415

    w0, c0 = time.perf_counter(), time.process_time()
    from numba.core import base, caching, dispatcher  # noqa: PLC0415
    numba_import = (time.perf_counter() - w0, time.process_time() - c0)

    stack: list[list[float]] = []   # per open frame: [child wall, child cpu]
    records: list[dict] = []

    def timed(fn, classify):
        def wrapper(self, *args, **kwargs):
            before = classify(self, None)
            stack.append([0.0, 0.0])
            w0, c0 = time.perf_counter(), time.thread_time()
            result = None
            try:
                result = fn(self, *args, **kwargs)
                return result
            finally:
                wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
                child = stack.pop()
                if stack:
                    stack[-1][0] += wall
                    stack[-1][1] += cpu
                kind, name = classify(self, before, result)
                if kind:
                    records.append({"kind": kind, "name": name,
                                    "sig": str(args[0]) if args else "",
                                    "wall": wall - child[0], "cpu": cpu - child[1]})
        return wrapper

    def name_of(py_func) -> str:
        return f"{py_func.__module__}.{py_func.__qualname__}".replace("<locals>.", "")

    def compile_kind(disp, before, result=None):
        state = (len(disp.overloads), sum(disp._cache_hits.values()))
        if before is None:
            return state
        grew, hit = state[0] > before[0], state[1] > before[1]
        return ("compile" if grew and not hit else None), name_of(disp.py_func)

    def cache_kind(kind):
        def classify(cache, before, result=None):
            if before is None:
                return True
            if kind == "load" and result is None:
                return None, ""
            return kind, name_of(cache._py_func)
        return classify

    def refresh_kind(ctx, before, result=None):
        return (True if before is None else ("setup", "numba target set-up"))

    dispatcher.Dispatcher.compile = timed(dispatcher.Dispatcher.compile, compile_kind)
    caching.Cache.load_overload = timed(caching.Cache.load_overload, cache_kind("load"))
    caching.Cache.save_overload = timed(caching.Cache.save_overload, cache_kind("save"))
    base.BaseContext.refresh = timed(base.BaseContext.refresh, refresh_kind)

    w0, c0 = time.perf_counter(), time.process_time()
    import histboost  # noqa: F401, PLC0415
    imported = (time.perf_counter() - w0 + numba_import[0],
                time.process_time() - c0 + numba_import[1])

    def dump() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        Path(out).write_text(json.dumps({
            "records": records, "import": imported,
            "process_cpu": usage.ru_utime + usage.ru_stime}))

    atexit.register(dump)
    sys.argv = [example]
    runpy.run_path(example, run_name="__main__")


# --- --profile: the parent ----------------------------------------------------------------------

def _profiled(root: Path, cache_dir: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, __file__, "--child-profile", out.name,
                        str(root / "examples" / "train_higgs.py")],
                       env=_env(root, cache_dir), check=True, capture_output=True)
        return json.loads(Path(out.name).read_text())


def _summary(prof: dict) -> dict[str, float]:
    by_kind: dict[str, float] = defaultdict(float)
    for r in prof["records"]:
        by_kind[r["kind"]] += r["cpu"]
    parts = {"import histboost": prof["import"][1], "numba target set-up": by_kind["setup"],
             "compiling": by_kind["compile"], "cache writes": by_kind["save"],
             "cache reads": by_kind["load"]}
    parts["the rest"] = prof["process_cpu"] - sum(parts.values())
    return {"process": prof["process_cpu"], **parts}


def _per_function(profs: list[dict], kind: str) -> list[tuple[str, int, float, float]]:
    """(function, signatures, median CPU s, median wall s) of `kind` records, largest first."""
    cpu: dict[str, list[float]] = defaultdict(list)
    wall: dict[str, list[float]] = defaultdict(list)
    sigs: dict[str, set[str]] = defaultdict(set)
    for prof in profs:
        run_cpu: dict[str, float] = defaultdict(float)
        run_wall: dict[str, float] = defaultdict(float)
        for r in prof["records"]:
            if r["kind"] == kind:
                run_cpu[r["name"]] += r["cpu"]
                run_wall[r["name"]] += r["wall"]
                sigs[r["name"]].add(r["sig"])
        for name in run_cpu:
            cpu[name].append(run_cpu[name])
            wall[name].append(run_wall[name])
    # a function some runs did not compile counts 0 s in those
    rows = [(name, len(sigs[name]),
             statistics.median(cpu[name] + [0.0] * (len(profs) - len(cpu[name]))),
             statistics.median(wall[name] + [0.0] * (len(profs) - len(wall[name]))))
            for name in cpu]
    return sorted(rows, key=lambda r: -r[2])


def _short(name: str) -> str:
    return name.removeprefix("histboost.kernels.cpu.").removeprefix("numba.")


def profile(roots: list[Path], runs: int) -> None:
    cold: dict[Path, list[dict]] = defaultdict(list)
    warm: dict[Path, list[dict]] = defaultdict(list)
    for i in range(runs):
        for root in roots if i % 2 == 0 else roots[::-1]:
            with tempfile.TemporaryDirectory() as cache:
                cold[root].append(_profiled(root, cache))
                warm[root].append(_profiled(root, cache))
            print(f"run {i + 1} {root}: cold {cold[root][-1]['process_cpu']:.2f} s CPU, warm "
                  f"{warm[root][-1]['process_cpu']:.2f} s CPU", flush=True)
    for root in roots:
        print(f"\n{root} (examples/train_higgs.py, {os.cpu_count()} cores), CPU seconds, "
              f"medians of {runs}:")
        for label, profs in (("cold", cold[root]), ("warm", warm[root])):
            sums = [_summary(p) for p in profs]
            print(f"  {label}: " + ", ".join(
                f"{k} {statistics.median(s[k] for s in sums):.2f}" for k in sums[0]))
        print(f"  {'compiled (cold run)':58s} {'sigs':>4s} {'CPU s':>6s} {'wall s':>6s}")
        for name, n_sigs, cpu, wall in _per_function(cold[root], "compile"):
            if cpu >= 0.005:
                print(f"  {_short(name):58s} {n_sigs:4d} {cpu:6.3f} {wall:6.3f}")
        print(f"  {'cache reads (warm run)':58s} {'sigs':>4s} {'CPU s':>6s} {'wall s':>6s}")
        for name, n_sigs, cpu, wall in _per_function(warm[root], "load"):
            print(f"  {_short(name):58s} {n_sigs:4d} {cpu:6.3f} {wall:6.3f}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child-profile":
        _child_profile(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="cold runs, each on a new cache")
    ap.add_argument("--warm", type=int, default=2, help="warm runs after each cold one")
    ap.add_argument("--compare", type=Path, action="append", default=[],
                    help="another checkout, run in turns with this one")
    ap.add_argument("--profile", action="store_true",
                    help="where each run's CPU seconds go, per compiled function")
    ap.add_argument("--bytecode", action="store_true",
                    help="compile the checkouts' modules first, as an installed package's are")
    a = ap.parse_args()
    roots = [ROOT, *(p.resolve() for p in a.compare)]
    if a.bytecode:
        # the children inherit this process's environment
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        for root in roots:
            _compile_bytecode(root)
    if a.profile:
        profile(roots, a.runs)
        return
    cold: dict[Path, list[tuple[float, float]]] = defaultdict(list)
    warm: dict[Path, list[tuple[float, float]]] = defaultdict(list)
    print("wall seconds (CPU seconds); Python bytecode "
          + ("compiled beforehand" if a.bytecode else "as the environment has it"), flush=True)
    for i in range(a.runs):
        for root in roots if i % 2 == 0 else roots[::-1]:
            with tempfile.TemporaryDirectory() as cache:
                cold[root].append(run(cache, root))
                warm[root] += [run(cache, root) for _ in range(a.warm)]
            print(f"{root}: cold {_fmt(cold[root][-1:])}, warm "
                  f"{_fmt(warm[root][-a.warm:]) if a.warm else '-'}", flush=True)

    def med(runs: list[tuple[float, float]], i: int) -> str:
        return f"{statistics.median(r[i] for r in runs):.2f}s" if runs else "-"

    for root in roots:
        print(f"\n{root}: examples/train_higgs.py, {os.cpu_count()} cores, medians: cold (empty "
              f"NUMBA_CACHE_DIR) {med(cold[root], 0)} wall, {med(cold[root], 1)} CPU; warm "
              f"{med(warm[root], 0)} wall, {med(warm[root], 1)} CPU")


if __name__ == "__main__":
    main()
