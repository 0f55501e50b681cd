"""Force the CPU backend's multi-thread paths on small test data.

The backend (`histboost.kernels.cpu.backend`) picks its code path by node size, with module
constants named ``*_MIN_ROWS``: ``*CHUNKED_MIN_ROWS`` (a node this large is split into chunks
built / partitioned by all threads) and others (a call this large runs multi-threaded at all).
`forced_paths` lowers them for the duration of a ``with`` block and counts the chunked kernel
calls, so a test can check that the path it means to cover really ran, whatever the constants
are called.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ..kernels.cpu import backend as cpu_backend

_CHUNKED_KERNELS = (("histogram", "build_histogram_chunked"),
                    ("partition", "partition_node_chunked"))


def _thresholds() -> list[str]:
    return [n for n, v in vars(cpu_backend).items()
            if n.startswith("_") and n.endswith("_MIN_ROWS") and isinstance(v, int)]


@contextmanager
def forced_paths(chunked: bool, min_rows: int = 1) -> Iterator[Counter]:
    """Within the block, calls on at least `min_rows` rows run multi-threaded and, when
    `chunked`, nodes of at least `min_rows` rows use the chunked kernels (otherwise those stay
    at their defaults, far above test sizes). Yields a Counter of chunked-kernel calls keyed by
    kernel name."""
    names = _thresholds()
    if not any("CHUNKED" in n for n in names):
        raise AssertionError(f"no *CHUNKED_MIN_ROWS constant in {cpu_backend.__name__}: "
                             "update histboost.testing.threads")
    calls: Counter = Counter()
    with pytest.MonkeyPatch.context() as mp:
        for n in names:
            if chunked or "CHUNKED" not in n:
                mp.setattr(cpu_backend, n, min_rows)
        if chunked and hasattr(cpu_backend, "_PARTITION_CHUNKED_MIN_THREADS"):
            mp.setattr(cpu_backend, "_PARTITION_CHUNKED_MIN_THREADS", 2)
        for module, fn in _CHUNKED_KERNELS:
            mod = getattr(cpu_backend, module)
            orig = getattr(mod, fn)

            def spy(*args, _orig=orig, _name=fn, **kwargs):
                calls[_name] += 1
                return _orig(*args, **kwargs)

            mp.setattr(mod, fn, spy)
        yield calls
