"""The backend conformance suite (`histboost.testing.conformance`) on the CPU backend, on one
thread and on several (the parallel kernels take other code paths)."""

from __future__ import annotations

import pytest

from histboost.kernels.backend import make_backend
from histboost.testing.conformance import CHECKS


def _cpu(n_threads):
    def make(bins, offsets, **kw):
        return make_backend("cpu", bins, offsets, n_threads=n_threads, **kw)
    return make


@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [0, 1])
def test_cpu_backend_conforms(check, seed, n_threads):
    check(_cpu(n_threads), seed)
