"""Launch a group of worker processes on loopback, as torchrun would, and collect results.

Each worker runs ``python _coll_scenarios.py SCENARIO OUTDIR`` with MASTER_ADDR/MASTER_PORT/RANK/
WORLD_SIZE set, writes ``OUTDIR/rank{r}.json`` and exits. Every group has a hard deadline:
stragglers are killed (each worker leads its own session, so its whole process group goes)
and the test fails; nothing outlives the test.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WORKER = HERE / "_coll_scenarios.py"


@dataclass
class RankResult:
    rank: int
    returncode: int | None
    result: dict | None
    log: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); treat reaped status via /proc when available
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def run_group(world_size: int, scenario: str, *, deadline_s: float = 120.0,
              extra_env: dict[str, str] | None = None, retries: int = 2) -> list[RankResult]:
    """Run ``scenario`` on ``world_size`` processes; returns each rank's outcome. Raises
    AssertionError if the group outlives ``deadline_s`` (after killing it)."""
    for attempt in range(retries + 1):
        results = _run_once(world_size, scenario, deadline_s, extra_env or {})
        busy = any("address already in use" in r.log.lower() for r in results)
        if not busy or attempt == retries:
            return results
    return results


def _run_once(world_size: int, scenario: str, deadline_s: float,
              extra_env: dict[str, str]) -> list[RankResult]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="hb-coll-") as tmp:
        out = Path(tmp)
        procs = []
        logs = []
        for r in range(world_size):
            env = dict(os.environ)
            env.update(
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), LOCAL_RANK=str(r),
                WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size),
                OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
                CUDA_VISIBLE_DEVICES="", GLOO_SOCKET_IFNAME=env.get("GLOO_SOCKET_IFNAME", "lo"),
                # small pipeline chunks: messages from 8 KiB up take the chunked paths
                HISTBOOST_COLLECTIVE_CHUNK_BYTES="4096",
            )
            env.update(extra_env)
            log = open(out / f"rank{r}.log", "w+")  # noqa: SIM115 (closed below)
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, str(WORKER), scenario, str(out)], env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=str(REPO)))
        end = time.monotonic() + deadline_s
        timed_out = False
        for p in procs:
            try:
                p.wait(timeout=max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
        if timed_out:
            for p in procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for p in procs:
                p.wait(timeout=10)
        results = []
        for r, (p, log) in enumerate(zip(procs, logs, strict=True)):
            log.seek(0)
            text = log.read()
            log.close()
            res_file = out / f"rank{r}.json"
            res = json.loads(res_file.read_text()) if res_file.exists() else None
            results.append(RankResult(r, p.returncode, res, text))
        leftovers = [p.pid for p in procs if _alive(p.pid)]
        assert not leftovers, f"processes left behind: {leftovers}"
        if timed_out:
            tails = "\n".join(f"--- rank {x.rank} (rc {x.returncode})\n{x.log[-3000:]}"
                              for x in results)
            raise AssertionError(
                f"{scenario} on {world_size} ranks outlived {deadline_s}s; killed.\n{tails}")
        return results


def describe(results: list[RankResult]) -> str:
    return "\n".join(f"--- rank {x.rank} (rc {x.returncode})\n{x.log[-4000:]}" for x in results)
