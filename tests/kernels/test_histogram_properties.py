"""Property tests of the CPU backend's histogram and partition kernels on small random data,
against the float64 row-by-row reference (`histboost.testing.reference.histogram`) and a NumPy
stable partition. The multi-thread and chunked kernels are forced onto small nodes by lowering
the backend's ``*_MIN_ROWS`` thresholds (`histboost.testing.threads.forced_paths`).

White-box: these drive the backend's range-level helpers (`_begin` with given integer pairs,
`_build_ranges`, `_partition`, `_subtract_pairs`, `_to_float`) to reach every histogram layout
(float, wide and packed integers, with and without counts) on arbitrary row ranges; the
node-level protocol is checked by the conformance suite (`test_conformance.py`)."""

from __future__ import annotations

from contextlib import contextmanager

import numba as nb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from histboost.kernels.cpu import histogram
from histboost.kernels.cpu.backend import CPUBackend
from histboost.testing import reference as ref
from histboost.testing.threads import forced_paths
from histboost.tree.quantize import Quantisation

UNIT = Quantisation(1.0, 1.0, 0)  # integer pairs given as they are, sums in integer units

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)

# (n_threads, chunked): one thread; two threads with small nodes one thread per node; two
# threads with every node built / partitioned by the chunked kernels.
MODES = [(1, False), (2, False), (2, True)]


@contextmanager
def _paths(n_threads: int, chunked: bool, rows_per_node: list[int]):
    """Run the block on the path of a mode, and check afterwards that the parallel kernels
    chunked a node exactly when asked (when some node has rows)."""
    if n_threads > 1 and nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    with forced_paths(chunked) as calls:
        yield
    if chunked:
        assert calls["histogram_chunked"] + calls["partition_chunked"] >= min(
            1, sum(1 for r in rows_per_node if r > 0))
    else:
        assert not calls


@st.composite
def problems(draw):
    """Random binned matrix (uint8, last slot of each feature = missing), gradient pairs
    (float32 and int32 versions) and a sorted subset of rows used by the tree."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 70))
    F = draw(st.integers(1, 4))
    value_bins = draw(st.lists(st.integers(1, 9), min_size=F, max_size=F))
    wide = draw(st.sampled_from([False, False, True]))  # > 256 slots: uint16 bins
    if wide:
        value_bins[0] = draw(st.integers(256, 400))
    missing = draw(st.sampled_from([0.0, 0.3, 1.0]))
    keep = draw(st.sampled_from([1.0, 0.5]))
    rng = np.random.default_rng(seed)
    n_slots = np.array(value_bins, np.int64) + 1
    bins = np.empty((n, F), np.uint16 if wide else np.uint8)
    for f in range(F):
        col = rng.integers(0, value_bins[f], n)
        col[rng.random(n) < missing] = value_bins[f]  # missing slot
        bins[:, f] = col
    offsets = np.concatenate([[0], np.cumsum(n_slots)]).astype(np.int64)
    gh_float = np.stack([rng.standard_normal(n), rng.random(n) + 0.01], 1).astype(np.float32)
    # small integers take the packed one-int64-per-slot layout, large ones the wide layout
    top = draw(st.sampled_from([3000, 2**29]))
    gh_int = np.stack([rng.integers(-top, top, n), rng.integers(0, top, n)], 1).astype(np.int32)
    rows = np.flatnonzero(rng.random(n) < keep).astype(np.int32)
    if rows.size == 0:
        rows = np.array([n - 1], np.int32)
    count_rows = draw(st.booleans())  # histograms with a row-count channel
    return {"bins": bins, "n_slots": n_slots, "offsets": offsets, "gh_float": gh_float,
            "gh_int": gh_int, "rows": rows, "count_rows": count_rows}


def _ref_hist(p, gh, rows):
    """float64 (total_bins, 2 or 3) gradient and hessian sums of the reference, and the row
    counts when the backend keeps them."""
    parts = ref.histogram(p["bins"], gh[:, 0].astype(np.float64), gh[:, 1].astype(np.float64),
                          rows, p["n_slots"])
    return np.concatenate(parts)[:, :3 if p["count_rows"] else 2]


def _as_float(be, hists, p):
    """Any histogram layout (float pairs, wide or packed integers, with or without counts) as
    float64 (k, bins, 2 or 3); integer sums here stay below 2**53, so this is exact."""
    out = be._to_float(hists)
    channels = 3 if p["count_rows"] else 2
    assert out.dtype == np.float64 and out.shape == (hists.shape[0], be.total_bins, channels)
    return out


def _backend(p, quantized, n_threads):
    be = CPUBackend(p["bins"], p["offsets"], n_threads=n_threads, count_rows=p["count_rows"])
    gh = p["gh_int"] if quantized else p["gh_float"]
    be._begin(gh, p["rows"], UNIT if quantized else None)
    return be, gh


def _assert_hist_equal(got, want, exact):
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("n_threads,chunked", MODES)
@SETTINGS
@given(p=problems())
def test_node_histogram_is_sum_over_its_rows(p, quantized, n_threads, chunked):
    rows = p["rows"]
    # the root and two sub-ranges of the row array, built in one call
    cut = rows.size // 2
    starts, ends = np.array([0, 0, cut]), np.array([rows.size, cut, rows.size])
    with _paths(n_threads, chunked, [rows.size]):  # the backend reads its paths when made
        be, gh = _backend(p, quantized, n_threads)
        hists = be._build_ranges(starts, ends)
    assert be.hist_dtype == (np.int64 if quantized else np.float64)
    assert hists.shape[:2] == (3, be.total_bins) and hists.dtype == be.hist_dtype
    fh = _as_float(be, hists, p)
    for k in range(3):
        want = _ref_hist(p, gh, rows[starts[k]:ends[k]])
        # integers are exact in any order; a single thread adds floats in row order as the
        # reference does; the chunked kernel adds them in another order
        _assert_hist_equal(fh[k], want, exact=quantized or not chunked)


def _ref_partition(p, segment, f, b, d):
    col = p["bins"][segment, f].astype(np.int64)
    missing = col == int(p["n_slots"][f]) - 1
    left = np.where(missing, d == 1, col <= b)
    return np.concatenate([segment[left], segment[~left]]), int(left.sum())


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("n_threads,chunked", MODES)
@SETTINGS
@given(p=problems(), n_nodes=st.integers(1, 3), data=st.data())
def test_partition_and_parent_equals_left_plus_right(p, quantized, n_threads, chunked,
                                                     n_nodes, data):
    rows = p["rows"]
    F = len(p["n_slots"])
    # split the row array into up to n_nodes contiguous nodes, leaving a gap at the front
    bounds = sorted(data.draw(st.lists(st.integers(0, rows.size), min_size=n_nodes + 1,
                                       max_size=n_nodes + 1)))
    starts, ends = np.array(bounds[:-1], np.int64), np.array(bounds[1:], np.int64)
    feats = np.array([data.draw(st.integers(0, F - 1)) for _ in starts], np.int32)
    split_bins = np.array([data.draw(st.integers(0, int(p["n_slots"][f]) - 2)) for f in feats],
                          np.int32)
    dleft = np.array([data.draw(st.integers(0, 1)) for _ in starts], np.uint8)
    with _paths(n_threads, chunked, list(ends - starts)):  # read by the backend when made
        be, gh = _backend(p, quantized, n_threads)
        before = be.rows.copy()
        parents = be._build_ranges(starts, ends)
        n_left = be._partition(list(zip(starts.tolist(), ends.tolist(), strict=True)), feats,
                               split_bins, dleft)
        mids = starts + n_left
        lefts = be._build_ranges(starts, mids)
        rights = be._build_ranges(mids, ends)
        # each pair in one buffer, the built child at one row and its sibling at the other
        k = starts.size
        built_rows = [2 * j + (j % 2) for j in range(k)]
        target_rows = [2 * j + 1 - (j % 2) for j in range(k)]
        pairs = be._subtract_pairs(parents, lefts, built_rows, target_rows)
        siblings = pairs[target_rows]
        np.testing.assert_array_equal(pairs[built_rows], lefts)
    after = be.rows
    touched = np.zeros(rows.size, bool)
    for k in range(starts.size):
        seg = before[starts[k]:ends[k]]
        want, want_left = _ref_partition(p, seg, int(feats[k]), int(split_bins[k]),
                                         int(dleft[k]))
        assert n_left[k] == want_left
        # stable: each side keeps the original row order (so stays sorted)
        np.testing.assert_array_equal(after[starts[k]:ends[k]], want)
        touched[starts[k]:ends[k]] = True
    np.testing.assert_array_equal(after[~touched], before[~touched])
    assert np.array_equal(np.sort(after), np.sort(before))

    if quantized:  # exact integer identities, in whatever layout the backend chose
        assert parents.dtype == np.int64
        np.testing.assert_array_equal(parents, lefts + rights)
        np.testing.assert_array_equal(siblings, rights)
    else:
        np.testing.assert_allclose(parents, lefts + rights, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(siblings, rights, rtol=1e-9, atol=1e-9)
    fl, fr = _as_float(be, lefts, p), _as_float(be, rights, p)
    for k in range(starts.size):
        _assert_hist_equal(fl[k], _ref_hist(p, gh, after[starts[k]:mids[k]]),
                           exact=quantized or not chunked)
        _assert_hist_equal(fr[k], _ref_hist(p, gh, after[mids[k]:ends[k]]),
                           exact=quantized or not chunked)


@SETTINGS
@given(p=problems())
def test_quantised_histograms_do_not_depend_on_thread_count(p):
    out = []
    for n_threads, chunked in MODES:
        with _paths(n_threads, chunked, [p["rows"].size]):  # read by the backend when made
            be, _ = _backend(p, True, n_threads)
            out.append(be._build_ranges(np.array([0]), np.array([p["rows"].size])))
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(out[0], out[2])


def test_to_float_scales_quantised_sums():
    bins = np.zeros((4, 1), np.uint8)
    be = CPUBackend(bins, np.array([0, 2]), n_threads=1)
    be._begin(np.array([[3, 5], [-1, 2], [4, 4], [0, 1]], np.int32),
              np.arange(4, dtype=np.int32), Quantisation(4.0, 2.0, 0))
    hist = be._build_ranges(np.array([0]), np.array([4]))
    f = be._to_float(hist)
    assert f.dtype == np.float64
    np.testing.assert_array_equal(f[0, 0, :2], [6 * 0.25, 12 * 0.5])
    np.testing.assert_array_equal(f[0, 1, :2], [0, 0])


@pytest.mark.parametrize("pieces", [0, 1, 3])
def test_unpack_parallel_and_serial(pieces):
    """Packed sums unpack the same on the serial kernel (pieces 0) and on the parallel one,
    each node in `pieces` value ranges (the backend picks by size, above test sizes)."""
    rng = np.random.default_rng(0)
    k = 3
    packed = (rng.integers(-2**20, 2**20, (k, 50)) << 32) + rng.integers(0, 2**31, (k, 50))
    got = np.full((k, 50, 2), np.nan)
    if pieces:
        histogram.unpack_to_float(packed, 0.5, 0.25, got, pieces)
    else:
        histogram.unpack_to_float_serial(packed, 0.5, 0.25, got)
    np.testing.assert_array_equal(got[..., 0], (packed >> 32) * 0.5)
    np.testing.assert_array_equal(got[..., 1], (packed & 0xFFFFFFFF) * 0.25)


def _items(starts, ends, chunks, blocks, offsets):
    """Work items and reduction items of `histogram.build_histograms`: node k in chunks[k]
    row chunks, every chunk in `blocks` feature blocks; the reductions in 3 pieces."""
    F = offsets.size - 1
    cuts = [F * b // blocks for b in range(blocks + 1)]
    width = 2 * int(offsets[-1])
    items, reduces, n_buf = [], [], 0
    for k, (s, e, c) in enumerate(zip(starts, ends, chunks, strict=True)):
        for ci in range(c):
            lo, hi = s + (e - s) * ci // c, s + (e - s) * (ci + 1) // c
            items += [(k, lo, hi, f0, f1, -1 if c == 1 else n_buf + ci, offsets[f0],
                       offsets[f1]) for f0, f1 in zip(cuts[:-1], cuts[1:], strict=True)]
        if c > 1:
            reduces += [(k, n_buf, c, width * p // 3, width * (p + 1) // 3) for p in range(3)]
            n_buf += c
    return (np.array(items, np.int64).reshape(-1, histogram.ITEM_WIDTH),
            np.array(reduces, np.int64).reshape(-1, histogram.RED_WIDTH), n_buf)


@pytest.mark.parametrize("blocks", [1, 2, 3])
@pytest.mark.parametrize("parallel", [False, True])
def test_work_items_sum_chunks_in_order(blocks, parallel):
    """Histograms of several nodes from work items (row chunks x feature blocks, in any item
    order) equal, bit for bit, each chunk summed in row order then the chunks added in
    chunk order: the feature blocks, the item order and the threads change no float sum."""
    rng = np.random.default_rng(blocks)
    n, F, B = 5000, 3, 7
    offsets = np.arange(F + 1, dtype=np.int64) * B
    slots = (rng.integers(0, B, (n, F)) + offsets[:F]).astype(np.uint16)
    gh = (rng.standard_normal((n, 2)) * 10.0 ** rng.uniform(-6, 6, (n, 1))).astype(np.float32)
    rows = np.sort(rng.choice(n, 3000, replace=False)).astype(np.int32)
    starts, ends, chunks = [100, 2900, 2950], [2900, 2950, 3000], [8, 1, 2]
    want = np.zeros((3, F * B, 2))
    for k, (s, e, c) in enumerate(zip(starts, ends, chunks, strict=True)):
        for ci in range(c):
            part = np.zeros((F * B, 2))
            r = rows[s + (e - s) * ci // c:s + (e - s) * (ci + 1) // c]
            for ch in range(2):  # np.add.at adds in index order: row order per slot
                np.add.at(part[:, ch], slots[r].ravel(),
                          np.repeat(gh[r, ch].astype(np.float64), F))
            want[k] = part if ci == 0 else want[k] + part
    items, reduces, n_buf = _items(starts, ends, chunks, blocks, offsets)
    kernel = histogram.build_histograms if parallel else histogram.build_histograms_serial
    for order in (slice(None), slice(None, None, -1)):
        got = np.full((3, F * B, 2), np.nan)
        buffers = np.full((n_buf, F * B, 2), np.nan)  # zeroed by the items themselves
        kernel(slots, gh, rows, np.ascontiguousarray(items[order]), reduces, 3, buffers, got,
               histogram.flat(buffers), histogram.flat(got))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pieces", [0, 1, 4])
@pytest.mark.parametrize("channels", [2, 3])
def test_scale_to_float_parallel_and_serial(pieces, channels):
    """Unpacked int64 sums (the distributed layout) scale to float64 as NumPy's float64
    product does, on the serial kernel (pieces 0) and on the parallel one, each node in
    `pieces` slot ranges."""
    rng = np.random.default_rng(channels)
    sums = rng.integers(-2**40, 2**40, (3, 50, channels))
    scales = np.array([2.0**-20, 2.0**-30, 1.0])[:channels]
    got = np.full(sums.shape, np.nan)
    if pieces:
        histogram.scale_to_float(sums, scales, got, pieces)
    else:
        histogram.scale_to_float_serial(sums, scales, got)
    np.testing.assert_array_equal(got, sums.astype(np.float64) * scales)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_gradient_bounds_are_the_largest_magnitudes(n_threads):
    """(max |g|, max |h|) on the serial (NumPy) and the parallel (`quantize.pair_bounds`)
    path; a NaN gradient gives a NaN bound, as NumPy's max does."""
    if n_threads > 1 and nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    rng = np.random.default_rng(n_threads)
    n = 5000
    be = CPUBackend(np.zeros((n, 1), np.uint8), np.array([0, 2]), n_threads=n_threads)
    gh = rng.standard_normal((1, n, 2)).astype(np.float32)
    gh[0, 17, 1] = -40.0  # a negative hessian (custom objective) counts by magnitude
    with forced_paths(False):
        be.set_gradients(gh)
        assert be.gradient_bounds(0) == (float(np.abs(gh[0, :, 0]).max()), 40.0)
        gh[0, 4000, 0] = np.nan
        be.set_gradients(gh)
        g, h = be.gradient_bounds(0)
    assert np.isnan(g) and h == 40.0


@pytest.mark.parametrize("where", ["numpy", "one buffer", "several buffers"])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_subtraction_reads_parents_where_they_are(where, dtype):
    """Siblings = parent - built child, and the built child copied, whether the parents are
    read in place (one buffer, rows in any order), copied to their siblings' rows (several
    buffers) or subtracted in NumPy on one thread: the same values as NumPy's subtraction."""
    if where != "numpy" and nb.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs at least 2 Numba threads")
    rng = np.random.default_rng(8)
    bins = rng.integers(0, 4, (64, 3)).astype(np.uint8)
    be = CPUBackend(bins, np.array([0, 5, 10, 15], np.int64), n_threads=2)
    shape = (15, 2)
    buffers = [(rng.standard_normal((4, *shape)) * 1e6).astype(dtype) for _ in range(2)]
    rows = [(0, 3), (0, 0), (1, 2)] if where == "several buffers" else [(1, 3), (1, 0), (1, 2)]
    parents = [buffers[b][j] for b, j in rows]
    built = (rng.standard_normal((3, *shape)) * 1e5).astype(dtype)
    built_rows, target_rows = [0, 3, 4], [1, 2, 5]
    source = None if where == "several buffers" else (buffers[1], [j for _, j in rows])
    with forced_paths(False, min_rows=1 if where != "numpy" else 10**9):
        out = be._subtract_pairs(parents, built, built_rows, target_rows, source)
    for j in range(3):
        np.testing.assert_array_equal(out[built_rows[j]], built[j])
        np.testing.assert_array_equal(out[target_rows[j]], parents[j] - built[j])
    # the parents are left as they were
    np.testing.assert_array_equal(parents[2], buffers[1][2])


@pytest.mark.parametrize("packed,with_ids", [(True, False), (False, True)])
def test_rounding_matches_a_numpy_reference(packed, with_ids):
    """The serial and the parallel rounding kernels give floor(g * inv_scale + u) with u
    drawn by the NumPy counter hash (`uniform01_numpy`) at counters 2r, 2r + 1 of each row's
    global index r, in both layouts, and count the negative hessians."""
    from histboost.kernels.cpu import quantize

    rng = np.random.default_rng(3)
    n = 20_000  # three blocks of the parallel kernel
    gh = rng.standard_normal((n, 2)).astype(np.float32)
    gh[::7, 1] = -gh[::7, 1] ** 2  # some negative hessians (custom objectives)
    ids = rng.permutation(4 * n)[:n].astype(np.int64) if with_ids else np.zeros(0, np.int64)
    key = np.uint64(0x1234_5678_9ABC_DEF0)
    r = (ids if with_ids else np.arange(n)).astype(np.uint64)
    want = np.stack([np.floor(gh[:, c].astype(np.float64) * s
                              + quantize.uniform01_numpy(key, 2 * r + np.uint64(c)))
                     for c, s in ((0, 64.0), (1, 128.0))], axis=1).astype(np.int32)
    want_negative = int((want[:, 1] < 0).sum())
    if packed:
        want = (want[:, 0].astype(np.int64) << 32) + want[:, 1]
    for run in ("serial", "parallel"):
        out = np.zeros(want.shape, want.dtype)
        if run == "serial":
            got = quantize.quantize_gradients(0, n, gh, ids, 64.0, 128.0, key, out)
        else:
            got = quantize.quantize_gradients_parallel(gh, ids, 64.0, 128.0, key, out)
        np.testing.assert_array_equal(out, want)
        assert got == want_negative
