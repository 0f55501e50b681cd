"""The algorithms over an in-process thread transport (histboost.collective.testing): random
world sizes, sizes, dtypes, roots and algorithms against NumPy, determinism, timeouts. Fast,
so it sweeps far more combinations than the multi-process tests."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import histboost.collective as hc  # noqa: E402
from histboost.collective.algorithms.layout import Fold, rel_ranges, split_counts  # noqa: E402
from histboost.collective.testing import run_threads  # noqa: E402

pytestmark = pytest.mark.timeout(120)
# in-process threads share no memory segment: "shared" is the process tests' (and raises here)
OURS = {k: [a for a in v if a not in ("native", "shared")] for k, v in hc.ALGORITHMS.items()}
UFUNC = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _inputs(p, shape, dtype, seed):
    return [np.random.default_rng([seed, q]).integers(-9, 9, size=shape).astype(dtype)
            for q in range(p)]


def _reduce(xs, op):
    out = xs[0].copy()
    for x in xs[1:]:
        UFUNC[op](out, x, out=out)
    return out


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 9), n=st.integers(0, 40), cols=st.sampled_from([None, 1, 3]),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64", "uint16", "float16"]),
       op=st.sampled_from(["sum", "max", "min"]), seed=st.integers(0, 2**16),
       root=st.integers(0, 8), data=st.data())
def test_random_calls_match_numpy(p, n, cols, dtype, op, seed, root, data):
    shape = (n,) if cols is None else (n, cols)
    xs = _inputs(p, shape, dtype, seed)
    root %= p
    algs = {k: data.draw(st.sampled_from(v), label=k) for k, v in OURS.items()}
    lengths = [data.draw(st.integers(0, 4), label=f"len{q}") for q in range(p)]
    gathered = [x[: min(len(x), lengths[q])] for q, x in enumerate(xs)]

    def body(comm):
        r = comm.rank
        return (comm.allreduce(xs[r], op=op, algorithm=algs["allreduce"]),
                comm.reduce_scatter(xs[r], op=op, algorithm=algs["reduce_scatter"]),
                comm.allgather(gathered[r], algorithm=algs["allgather"]),
                comm.broadcast(xs[r], root=root, algorithm=algs["broadcast"]),
                comm.reduce(xs[r], root=root, op=op, algorithm=algs["reduce"]))

    want = _reduce(xs, op)
    for r, (ar, rs, ag, bc, rd) in enumerate(run_threads(p, body, timeout=20)):
        np.testing.assert_array_equal(ar, want)
        assert ar.dtype == want.dtype and ar.shape == want.shape
        np.testing.assert_array_equal(rs, np.array_split(want, p)[r])
        np.testing.assert_array_equal(ag, np.concatenate(gathered))
        np.testing.assert_array_equal(bc, xs[root])
        if r == root:
            np.testing.assert_array_equal(rd, want)
        else:
            assert rd is None


@pytest.mark.parametrize("p", [3, 6, 8])
def test_all_ranks_bit_identical_and_reproducible(p):
    xs = [np.random.default_rng(q).standard_normal(1001) * 1e3 for q in range(p)]

    def body(comm):
        return {a: (comm.allreduce(xs[comm.rank], algorithm=a),
                    comm.allreduce(xs[comm.rank], algorithm=a)) for a in OURS["allreduce"]}

    res = run_threads(p, body)
    for a in OURS["allreduce"]:
        first = res[0][a][0]
        for r in range(p):
            for out in res[r][a]:
                assert out.tobytes() == first.tobytes(), (a, r)
        np.testing.assert_allclose(first, np.sum(xs, axis=0), rtol=1e-12, atol=1e-9)


def test_record_reducer_on_rows_and_on_a_single_record():
    p = 5
    recs = [np.array([[q % 2, q, 0.0], [1.0, 4 - q, 1.0]]) for q in range(p)]

    def best(a, b):  # higher gain, then lower feature
        return a if (-a[0], a[1]) <= (-b[0], b[1]) else b

    def body(comm):
        x = recs[comm.rank]
        return ([comm.allreduce(x, op=best, algorithm=a) for a in OURS["allreduce"]],
                comm.allreduce(x[1], op=best), comm.reduce_scatter(x, op=best))

    want = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    for r, (outs, one, block) in enumerate(run_threads(p, body)):
        for out in outs:
            np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(one, want[1])
        np.testing.assert_array_equal(block, np.array_split(want, p)[r])


def test_missing_rank_times_out_naming_the_peer():
    def body(comm):
        if comm.rank == 2:
            return None
        with pytest.raises(hc.CollectiveTimeout) as info:
            comm.allreduce(np.ones(4), algorithm="ring", timeout=0.5)
        with pytest.raises(hc.CollectiveError, match="unusable"):
            comm.allreduce(np.ones(4))
        return info.value

    errs = run_threads(3, body)
    for r in (0, 1):
        e = errs[r]
        assert e.rank == r and e.peer in (0, 1, 2) and f"rank {e.peer}" in str(e)
        assert "allreduce" in str(e)


def test_metadata_mismatch_keeps_communicator_usable():
    def body(comm):
        with pytest.raises(hc.MetadataMismatchError, match=r"shape.*\(3,\).*\(2,\)"):
            comm.allreduce(np.ones(3 if comm.rank == 0 else 2))
        return comm.allreduce(np.ones(2))

    for out in run_threads(2, body):
        np.testing.assert_array_equal(out, [2.0, 2.0])


def test_native_is_refused_without_an_engine():
    def body(comm):
        with pytest.raises(ValueError, match="no native engine"):
            comm.allreduce(np.ones(2), algorithm="native")
        return True

    assert all(run_threads(2, body))


def test_layout_helpers():
    for n in range(12):
        for p in range(1, 10):
            assert split_counts(n, p) == [len(b) for b in np.array_split(np.arange(n), p)]
    for p in range(1, 20):
        fold = Fold(p)
        covered = []
        for v in range(fold.k):
            a, b = fold.first_real(v), fold.first_real(v + 1)
            covered += list(range(a, b))
            assert fold.role(fold.real(v))[1] == v
        assert covered == list(range(p))
        for root in range(p):
            for lo in range(p + 1):
                for hi in range(lo, p + 1):
                    runs = rel_ranges(lo, hi, root, p)
                    ranks = [x for a, b in runs for x in range(a, b)]
                    assert sorted(ranks) == sorted((q + root) % p for q in range(lo, hi))


@pytest.mark.parametrize("chunk_bytes", [8, 100])
def test_pipelined_paths_match_numpy(monkeypatch, chunk_bytes):
    """Tiny pipeline chunks, so every chunked code path runs on small buffers, with records
    of 3 elements that chunks must not cut."""
    from histboost.collective.algorithms import context

    monkeypatch.setattr(context, "PIPELINE_MIN_CHUNK_BYTES", chunk_bytes)
    for p in (2, 3, 5, 8):
        xs = _inputs(p, (4 * p + 3, 3), "float64", p)
        rows = [x.copy() for x in xs]

        def body(comm, xs=xs, rows=rows, p=p):
            r = comm.rank
            return ([comm.allreduce(xs[r], algorithm=a) for a in OURS["allreduce"]],
                    [comm.allreduce(rows[r], op=lambda a, b: np.maximum(a, b), algorithm=a)
                     for a in OURS["allreduce"]],
                    [comm.reduce_scatter(xs[r], algorithm=a) for a in OURS["reduce_scatter"]],
                    [comm.allgather(xs[r], algorithm=a) for a in OURS["allgather"]],
                    [comm.broadcast(xs[r], root=p - 1, algorithm=a)
                     for a in OURS["broadcast"]],
                    [comm.reduce(xs[r], root=1, algorithm=a) for a in OURS["reduce"]])

        want, mx = _reduce(xs, "sum"), _reduce(xs, "max")
        for r, (ar, cb, rs, ag, bc, rd) in enumerate(run_threads(p, body)):
            for out in ar:
                np.testing.assert_array_equal(out, want)
            for out in cb:
                np.testing.assert_array_equal(out, mx)
            for out in rs:
                np.testing.assert_array_equal(out, np.array_split(want, p)[r])
            for out in ag:
                np.testing.assert_array_equal(out, np.concatenate(xs))
            for out in bc:
                np.testing.assert_array_equal(out, xs[p - 1])
            for out in rd:
                if r == 1:
                    np.testing.assert_array_equal(out, want)
                else:
                    assert out is None


def test_cupy_arrays_round_trip():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.zeros(1)
    except Exception:
        pytest.skip("no CUDA device")

    def body(comm):
        x = cupy.arange(7, dtype=cupy.float32) + comm.rank
        out = comm.allreduce(x, algorithm="ring")
        assert isinstance(out, cupy.ndarray)
        return cupy.asnumpy(out)

    for out in run_threads(3, body):
        np.testing.assert_array_equal(out, np.arange(7) * 3 + 3)


def test_cuda_tensors_every_algorithm():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from histboost.collective.algorithms import context

    p, n = 3, 3 * (1 << 20) + 5
    xs = [torch.randint(-9, 9, (n,), device="cuda").float() for _ in range(p)]
    want = sum(x.double() for x in xs).float()
    old = context.PIPELINE_MIN_CHUNK_BYTES
    context.PIPELINE_MIN_CHUNK_BYTES = 1 << 20  # the chunked paths too

    def body(comm):
        x = xs[comm.rank]
        return ([comm.allreduce(x, algorithm=a) for a in OURS["allreduce"]],
                [comm.reduce_scatter(x, algorithm=a) for a in OURS["reduce_scatter"]],
                [comm.allgather(x, algorithm=a) for a in OURS["allgather"]],
                [comm.broadcast(x, root=2, algorithm=a) for a in OURS["broadcast"]])

    try:
        res = run_threads(p, body)
    finally:
        context.PIPELINE_MIN_CHUNK_BYTES = old
    for r, (ar, rs, ag, bc) in enumerate(res):
        for out in ar:
            assert out.is_cuda and torch.equal(out, want)
        for out in rs:
            assert torch.equal(out, torch.tensor_split(want, p)[r])
        for out in ag:
            assert torch.equal(out, torch.cat(xs))
        for out in bc:
            assert torch.equal(out, xs[2])


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype,cols", [("float64", 3), ("uint64", None), ("int32", 2)])
def test_alltoall_delivers_each_block_to_its_rank(p, dtype, cols):
    """Rank r sends counts[r][d] rows to rank d; rank d receives them grouped by sender in
    rank order (empty blocks included)."""
    rng = np.random.default_rng([p, cols or 1])
    counts = rng.integers(0, 4, size=(p, p))
    counts[0, -1] = 0
    sends = []
    for r in range(p):
        n = int(counts[r].sum())
        shape = (n,) if cols is None else (n, cols)
        sends.append((rng.integers(0, 1000, size=shape) + 1000 * r).astype(dtype))

    def body(comm):
        return comm.alltoall(sends[comm.rank], counts[comm.rank])

    for d, (got, received) in enumerate(run_threads(p, body, timeout=20)):
        np.testing.assert_array_equal(received, counts[:, d])
        want = [np.split(sends[r], np.cumsum(counts[r])[:-1])[d] for r in range(p)]
        np.testing.assert_array_equal(got, np.concatenate(want))
        assert got.dtype == np.dtype(dtype)


def test_alltoall_rejects_counts_that_do_not_cover_the_rows():
    def body(comm):
        with pytest.raises(ValueError, match="counts must be 2"):
            comm.alltoall(np.arange(3.0), [1, 1])
        return comm.alltoall(np.arange(2.0), [1, 1])[1]

    assert [list(c) for c in run_threads(2, body, timeout=20)] == [[1, 1], [1, 1]]


def test_alltoall_times_out_when_a_rank_does_not_call():
    def body(comm):
        if comm.rank == 1:
            return None
        with pytest.raises(hc.CollectiveTimeout, match="alltoall"):
            comm.alltoall(np.arange(4.0), [2, 2], timeout=1.0)
        return "raised"

    assert run_threads(2, body, timeout=20)[0] == "raised"
