"""Force the CPU backend's multi-thread paths on small test data.

The backends (`histboost.kernels.cpu.backend` and `.sparse_backend`) pick their code paths by
the size of the work, with module constants: ``*CHUNKED_MIN_ROWS`` (a node this large is
summed in row chunks, a call this large is partitioned in chunks by all threads) and others
ending in ``_MIN_ROWS``, ``_MIN_VALUES`` or ``_MIN_SLOTS`` (a call this large runs
multi-threaded, a work item holds at least this much) or ``_MIN_FEATURES`` (a feature block
holds at least this many features).
`forced_paths` lowers them for the duration of a ``with`` block and counts the parallel
kernel calls that cut a node into several row chunks, so a test can check that the path it
means to cover really ran, whatever the constants are called.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from ..kernels.cpu import backend as cpu_backend
from ..kernels.cpu import histogram, partition, sparse_backend


def _histogram_chunked(args) -> bool:
    """A `histogram.build_histograms` call adding up row chunks of a node."""
    return args[4].shape[0] > 0


def _partition_chunked(args) -> bool:
    """A `partition.partition_nodes` call cutting a node into several chunks."""
    nodes = args[7][:, partition.PART_NODE]
    return nodes.shape[0] > np.unique(nodes).shape[0]


# (module, parallel kernel, Counter key, predicate on its positional arguments)
_CHUNKED_KERNELS = ((histogram, "build_histograms", "histogram_chunked", _histogram_chunked),
                    (partition, "partition_nodes", "partition_chunked", _partition_chunked))
_THRESHOLD = re.compile(r"^_[A-Z_]+_MIN_(ROWS|VALUES|SLOTS|FEATURES)$")


def _thresholds() -> list[tuple[object, str]]:
    return [(m, n) for m in (cpu_backend, sparse_backend) for n, v in vars(m).items()
            if _THRESHOLD.match(n) and isinstance(v, int)]


@contextmanager
def forced_paths(chunked: bool, min_rows: int = 1) -> Iterator[Counter]:
    """Within the block, calls on at least `min_rows` rows (values, slots) run
    multi-threaded, feature blocks may hold one feature and, when `chunked`, nodes of at
    least `min_rows` rows are summed and partitioned in chunks (otherwise those stay at their
    defaults, far above test sizes). Yields a Counter of the parallel kernel calls that
    chunked a node: keys "histogram_chunked" and "partition_chunked"."""
    names = _thresholds()
    if not any("CHUNKED" in n for _, n in names):
        raise AssertionError(f"no *CHUNKED_MIN_ROWS constant in {cpu_backend.__name__}: "
                             "update histboost.testing.threads")
    calls: Counter = Counter()
    with pytest.MonkeyPatch.context() as mp:
        for module, n in names:
            if chunked or "CHUNKED" not in n:
                mp.setattr(module, n, 1 if n.endswith("_FEATURES") else min_rows)
        for module, fn, key, chunks in _CHUNKED_KERNELS:
            orig = getattr(module, fn)

            def spy(*args, _orig=orig, _key=key, _chunks=chunks, **kwargs):
                if _chunks(args):
                    calls[_key] += 1
                return _orig(*args, **kwargs)

            mp.setattr(module, fn, spy)
        yield calls
