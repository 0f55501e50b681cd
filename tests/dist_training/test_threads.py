"""Per-process settings of the ranks of one host: each takes its share of the cores by
default, Numba's pool is sized to it before it starts, glibc keeps freed blocks."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

from histboost.collective import SingleCommunicator
from histboost.distributed import training as dist

REPO = Path(__file__).resolve().parents[2]


def test_default_threads_are_the_host_cores_shared_among_its_ranks(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    comm = SingleCommunicator()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert dist.ranks_on_host(comm) == 4
    assert dist.prepare_rank(comm, 0) == max(1, cores // 4)
    assert dist.prepare_rank(comm, 3) == 3  # an explicit nthread wins
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert dist.ranks_on_host(comm) == 1  # world size 1
    assert dist.prepare_rank(comm, 0) == cores


def _run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                         env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


SIZE_THEN_RUN = """
    import numba, numpy as np
    from histboost.distributed.training import size_numba_pool

    @numba.njit(parallel=True)
    def total(x):
        s = 0.0
        for i in numba.prange(x.shape[0]):
            s += x[i]
        return s

    sized = size_numba_pool(1)
    print(sized, total(np.ones(1000)), numba.config.NUMBA_NUM_THREADS,
          numba.get_num_threads(), size_numba_pool(1))
"""


def test_numba_pool_is_sized_before_it_starts_only(monkeypatch):
    if len(os.sched_getaffinity(0)) < 2:
        return  # one core: the pool is one thread already
    sized, total, pool, team, again = _run(SIZE_THEN_RUN)
    assert (sized, float(total), pool, team, again) == ("True", 1000.0, "1", "1", "False")
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")  # the user's choice wins
    assert not dist.size_numba_pool(1)


def test_allocator_settings_yield_to_the_environment(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert not dist.keep_freed_memory()
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert dist.keep_freed_memory()
