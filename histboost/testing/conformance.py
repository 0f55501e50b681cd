"""Backend conformance checks: one suite for every implementation of
`histboost.kernels.backend.Backend` (the CPU backend, the CUDA backend on a GPU and under Numba's
CUDA simulator, and the distributed wrapper), each step compared with the float64 NumPy
references of `histboost.testing.reference`, never with another backend.

A check takes a factory ``make(bins, bin_offsets, *, label, weight, n_outputs, count_rows)``
returning a fresh backend, and a seed; it raises AssertionError on a mismatch. `CHECKS` lists
them all; the test suites parametrise over it (see ``tests/kernels/test_conformance.py``). The
inputs are tiny (a few hundred rows) so the simulator runs them in seconds.

Float histograms may be summed in any order, or in fixed point on a GPU; they are compared
with a tolerance relative to the sum of magnitudes plus, per row, the backend's declared
`row_rounding` (the largest error a float tree's pair may get, relative to the tree's largest
|g| or |h|). Quantised histograms are exact integers and are compared for equality.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..data.binning import BinMapper, compute_bin_mapper
from ..params import parse_params
from ..tree.grower import TreeGrower
from ..tree.predictor import PackedForest
from ..tree.quantize import Quantisation, make_quantisation
from ..tree.split import (
    REC_BIN,
    REC_DEFAULT_LEFT,
    REC_FEATURE,
    REC_GAIN,
    REC_LEFT_G,
    REC_LEFT_H,
    REC_WIDTH,
    regularisation_vector,
)
from . import model_reference as mref
from . import reference as ref

Factory = Callable[..., object]

# float histograms: |error| <= FLOAT_RTOL * (sum of |values| in the slot's rows) + tiny
FLOAT_RTOL = 1e-6
# rows of the checks' problems; a suite under Numba's CUDA simulator, which runs every GPU
# thread as a Python thread, sets fewer
PROBLEM_ROWS = 240


@dataclass
class Problem:
    """Raw data, its bins and cuts, labels, weights and random gradient pairs."""

    X: np.ndarray
    bins: np.ndarray
    mapper: BinMapper
    label: np.ndarray
    weight: np.ndarray | None
    gh: np.ndarray  # float32 (n, 2)

    @property
    def n_slots(self) -> np.ndarray:
        return self.mapper.n_bins

    @property
    def offsets(self) -> np.ndarray:
        return self.mapper.bin_offsets


def make_problem(seed: int, n: int | None = None, n_features: int = 4, max_bin: int = 12,
                 missing: float = 0.15, weighted: bool = True,
                 exact_gradients: bool = False) -> Problem:
    """A small random problem: features with few distinct values, missing ones, and gradient
    pairs (multiples of 1/64 when `exact_gradients`, so every float sum is exact)."""
    rng = np.random.default_rng(seed)
    n = PROBLEM_ROWS if n is None else n
    X = np.round(rng.normal(size=(n, n_features)) * 3) / 2
    X[rng.random(X.shape) < missing] = np.nan
    weight = rng.random(n) * 2 + 0.1 if weighted else None
    mapper = compute_bin_mapper(X, weight, max_bin)
    bins = mapper.transform(X)
    g = rng.normal(size=n)
    h = rng.random(n) + 0.05
    if exact_gradients:
        g, h = np.round(g * 64) / 64, np.round(h * 64) / 64 + 1 / 64
    gh = np.stack([g, h], 1).astype(np.float32)
    label = (rng.random(n) < 0.4).astype(np.float64)
    return Problem(X, bins, mapper, label, weight, gh)


def _backend(make: Factory, p: Problem, n_outputs: int = 1, count_rows: bool = False):
    return make(p.bins, p.offsets, label=p.label, weight=p.weight, n_outputs=n_outputs,
                count_rows=count_rows)


def _with_gradients(make: Factory, p: Problem, count_rows: bool = False):
    be = _backend(make, p, 1, count_rows)
    be.set_gradients(p.gh[None])
    return be


def _ref_hist(p: Problem, rows: np.ndarray, gh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference sums float64 (total_bins, 3) (G, H, count) over `rows`, and the sums of
    magnitudes (total_bins, 2) that bound a float histogram's rounding error."""
    g, h = gh[:, 0].astype(np.float64), gh[:, 1].astype(np.float64)
    sums = np.concatenate(ref.histogram(p.bins, g, h, rows, p.n_slots))
    mags = np.concatenate(ref.histogram(p.bins, np.abs(g), np.abs(h), rows, p.n_slots))
    return sums, mags[:, :2]


def _slack(be, gh: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(slots, 2) error the backend's declared per-row rounding allows in each slot."""
    top = np.abs(gh.astype(np.float64)).max(axis=0)
    return counts[:, None] * float(getattr(be, "row_rounding", 0.0)) * top[None, :]


def _assert_float_hist(got: np.ndarray, want: np.ndarray, mags: np.ndarray, what: str,
                       slack: np.ndarray | float = 0.0) -> None:
    err = np.abs(got[:, :2] - want[:, :2])
    tol = FLOAT_RTOL * mags + slack + 1e-12
    if np.any(err > tol):
        i = np.unravel_index(np.argmax(err - tol), err.shape)
        raise AssertionError(f"{what}: slot {i[0]} channel {i[1]}: got {got[i]!r}, want "
                             f"{want[i]!r}")
    if got.shape[1] == 3:
        np.testing.assert_array_equal(got[:, 2], want[:, 2], err_msg=f"{what}: row counts")


def _split_rows(p: Problem, rows: np.ndarray, f: int, b: int, d: int) -> np.ndarray:
    """bool (len(rows),): rows going left on (feature f, bin <= b, missing left iff d)."""
    col = p.bins[rows, f].astype(np.int64)
    missing = col == int(p.n_slots[f]) - 1
    return np.where(missing, d == 1, col <= b)


def _record(f: int, b: int, d: int) -> np.ndarray:
    rec = np.zeros((1, REC_WIDTH))
    rec[0, REC_FEATURE], rec[0, REC_BIN], rec[0, REC_DEFAULT_LEFT] = f, b, d
    return rec


def _quantised_reference(gh: np.ndarray, q: Quantisation) -> np.ndarray:
    """int64 (n, 2) stochastic rounding of float32 pairs, written with Python integers (an
    independent splitmix64): floor(v * inv_scale + u), u from the top 53 bits of
    splitmix64(key ^ splitmix64(2 * row + channel))."""
    mask = (1 << 64) - 1

    def mix(x: int) -> int:
        z = (x + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    out = np.empty(gh.shape, np.int64)
    for i in range(gh.shape[0]):
        for c, inv in ((0, q.g_inv_scale), (1, q.h_inv_scale)):
            u = (mix(q.key ^ mix(2 * i + c)) >> 11) * (1.0 / 9007199254740992.0)
            out[i, c] = int(np.floor(np.float64(gh[i, c]) * inv + u))
    return out


# -- the checks -------------------------------------------------------------------------------

def check_gradients(make: Factory, seed: int) -> None:
    """compute_gradients of every built-in loss against float64 NumPy, weights included,
    with saturated margins; margins round-trip through set_margin / margin."""
    rng = np.random.default_rng(seed)
    p = make_problem(seed, n=PROBLEM_ROWS * 5 // 8)
    for loss, K in (("squared_error", 1), ("logistic", 1), ("softmax", 3)):
        for weight in (p.weight, None):
            m = rng.normal(0, 3, (p.bins.shape[0], K))
            m[:3] = np.array([40.0, -40.0, 0.0])[:, None]
            y = (rng.integers(0, K, p.bins.shape[0]) if K > 1 else
                 rng.normal(size=p.bins.shape[0]) if loss == "squared_error" else
                 rng.integers(0, 2, p.bins.shape[0])).astype(np.float64)
            be = make(p.bins, p.offsets, label=y, weight=weight, n_outputs=K, count_rows=False)
            be.set_margin(m)
            np.testing.assert_array_equal(be.margin(), m)
            be.compute_gradients(loss)
            w = np.ones_like(y) if weight is None else weight
            if loss == "squared_error":
                g, h = (m[:, 0] - y)[None], np.ones((1, y.size))
            elif loss == "logistic":
                pr = 1.0 / (1.0 + np.exp(-m[:, 0]))
                g, h = (pr - y)[None], np.maximum(pr * (1 - pr), 1e-16)[None]
            else:
                e = np.exp(m - m.max(axis=1, keepdims=True))
                pr = e / e.sum(axis=1, keepdims=True)
                g = (pr - np.eye(K)[y.astype(int)]).T
                h = np.maximum(2 * pr * (1 - pr), 1e-16).T
            for k in range(K):
                got = be.gradients(k)
                assert got.dtype == np.float32 and got.shape == (y.size, 2), (loss, got.shape)
                np.testing.assert_allclose(got[:, 0], g[k] * w, rtol=2e-6, atol=1e-7,
                                           err_msg=f"{loss} gradient")
                np.testing.assert_allclose(got[:, 1], h[k] * w, rtol=2e-6, atol=1e-30,
                                           err_msg=f"{loss} hessian")
            bounds = be.gradient_bounds(K - 1)
            last = be.gradients(K - 1)
            assert bounds == (float(np.abs(last[:, 0]).max()), float(np.abs(last[:, 1]).max()))


def check_root_histogram(make: Factory, seed: int) -> None:
    """The root histogram of a row sample (and of all rows) is the sum over its rows; its
    totals are the sums of the first feature's slots; counts when asked for."""
    p = make_problem(seed)
    rng = np.random.default_rng(seed + 100)
    for count_rows in (False, True):
        be = _with_gradients(make, p, count_rows)
        for rows in (None, np.flatnonzero(rng.random(p.bins.shape[0]) < 0.6).astype(np.int32)):
            n = be.begin_tree(0, rows, None)
            use = np.arange(p.bins.shape[0]) if rows is None else rows
            assert n == use.size, (n, use.size)
            be.build_histograms([0])
            got = be.read_histograms([0])
            assert got.shape == (1, int(p.offsets[-1]), 3 if count_rows else 2), got.shape
            want, mags = _ref_hist(p, use, p.gh)
            _assert_float_hist(got[0], want, mags, "root histogram",
                               _slack(be, p.gh, want[:, 2]))
            tot = be.histogram_totals([0])[0]
            f0 = slice(int(p.offsets[0]), int(p.offsets[1]))
            np.testing.assert_allclose(tot, got[0, f0, :2].sum(axis=0), rtol=1e-12, atol=1e-12)


def check_quantised_histograms(make: Factory, seed: int) -> None:
    """Quantised trees: the pairs are rounded exactly as the reference rounding, and every
    histogram (built, or subtracted) is the exact integer sum times the scales."""
    p = make_problem(seed)
    for bits, count_rows in ((8, False), (16, True), (3, False)):
        be = _with_gradients(make, p, count_rows)
        g_bound, h_bound = be.gradient_bounds(0)
        q = make_quantisation(g_bound, h_bound, bits, key=0xDEADBEEF + seed)
        ints = _quantised_reference(p.gh, q)
        rows = np.arange(0, p.bins.shape[0], 2, dtype=np.int32)
        be.begin_tree(0, rows, q)
        be.build_histograms([0])
        sums = np.concatenate(ref.histogram(p.bins, ints[:, 0].astype(np.float64),
                                            ints[:, 1].astype(np.float64), rows, p.n_slots))
        want = sums[:, :3 if count_rows else 2] * np.array([q.g_scale, q.h_scale, 1.0][
            :3 if count_rows else 2])
        np.testing.assert_array_equal(be.read_histograms([0])[0], want, err_msg=f"bits {bits}")
        f, b, d = 1, 2, 1
        counts = be.apply_splits([0], [1], [2], _record(f, b, d))
        left = _split_rows(p, rows, f, b, d)
        be.build_histograms([2])
        be.subtract_histograms([0], [2], [1])
        for node, sel in ((1, rows[left]), (2, rows[~left])):
            s = np.concatenate(ref.histogram(p.bins, ints[:, 0].astype(np.float64),
                                             ints[:, 1].astype(np.float64), sel, p.n_slots))
            w = s[:, :want.shape[1]] * np.array([q.g_scale, q.h_scale, 1.0][:want.shape[1]])
            np.testing.assert_array_equal(be.read_histograms([node])[0], w,
                                          err_msg=f"node {node}, bits {bits}")
        assert counts.tolist() == [[int(left.sum()), int((~left).sum())]]


def check_partition_and_subtraction(make: Factory, seed: int) -> None:
    """Two levels of splits (one node, then two at once): child row counts, built and
    subtracted histograms against the reference sums over each child's rows, left sums of
    evaluate_split."""
    p = make_problem(seed)
    rng = np.random.default_rng(seed + 7)
    for count_rows in (False, True):
        be = _with_gradients(make, p, count_rows)
        rows = np.flatnonzero(rng.random(p.bins.shape[0]) < 0.8).astype(np.int32)
        be.begin_tree(0, rows, None)
        be.build_histograms([0])
        members = {0: rows}
        f, b, d = int(rng.integers(p.bins.shape[1])), 1, int(rng.integers(2))
        counts = be.apply_splits([0], [1], [2], _record(f, b, d))
        left = _split_rows(p, rows, f, b, d)
        members[1], members[2] = rows[left], rows[~left]
        assert counts.tolist() == [[members[1].size, members[2].size]], counts
        be.build_histograms([1])
        be.subtract_histograms([0], [1], [2])
        # level 2: both nodes split at once, the right child of one built, the left of other
        recs = np.concatenate([_record(0, 2, 0), _record(p.bins.shape[1] - 1, 0, 1)])
        counts = be.apply_splits([1, 2], [3, 5], [4, 6], recs)
        for j, (parent, lc, rc) in enumerate(((1, 3, 4), (2, 5, 6))):
            r = members[parent]
            sel = _split_rows(p, r, int(recs[j, REC_FEATURE]), int(recs[j, REC_BIN]),
                              int(recs[j, REC_DEFAULT_LEFT]))
            members[lc], members[rc] = r[sel], r[~sel]
            assert counts[j].tolist() == [members[lc].size, members[rc].size], (j, counts)
        be.build_histograms([4, 5])
        be.subtract_histograms([1, 2], [4, 5], [3, 6])
        for node in (3, 4, 5, 6):
            want, mags = _ref_hist(p, members[node], p.gh)
            # a subtracted histogram carries the rounding of its parent's rows
            parent = members[1 if node in (3, 4) else 2]
            _assert_float_hist(be.read_histograms([node])[0], want, mags, f"node {node}",
                               _slack(be, p.gh, _ref_hist(p, parent, p.gh)[0][:, 2]))
        got = be.evaluate_split([3, 4, 5, 6], 2, 1, True)
        for j, node in enumerate((3, 4, 5, 6)):
            r = members[node]
            sel = r[_split_rows(p, r, 2, 1, 1)]
            want = [p.gh[sel, 0].astype(np.float64).sum(), p.gh[sel, 1].astype(np.float64).sum()]
            mag = np.abs(p.gh[r].astype(np.float64)).sum(axis=0)
            slack = _slack(be, p.gh, np.array([float(p.bins.shape[0])]))[0]
            assert np.all(np.abs(got[j] - want) <= FLOAT_RTOL * mag + slack + 1e-12), \
                (node, got[j], want)


def _reg(**kw) -> np.ndarray:
    return regularisation_vector(parse_params(kw))


def check_split_search(make: Factory, seed: int) -> None:
    """find_best_splits against the brute-force best split (exact gradients: every sum is
    exact in any order), with L1, min_child_weight, min_data_in_leaf and a feature mask."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    g, h = p.gh[:, 0].astype(np.float64), p.gh[:, 1].astype(np.float64)
    settings = [ref.Reg(1.0, 0.0, 0.5, 0), ref.Reg(0.5, 0.3, 1.0, 5)]
    for reg in settings:
        vec = _reg(reg_lambda=reg.reg_lambda, reg_alpha=reg.reg_alpha,
                   min_child_weight=reg.min_child_weight, min_data_in_leaf=reg.min_data_in_leaf)
        be = _with_gradients(make, p, count_rows=reg.min_data_in_leaf > 0)
        rows = np.arange(p.bins.shape[0], dtype=np.int32)
        be.begin_tree(0, None, None)
        be.build_histograms([0])
        totals = np.array([[g.sum(), h.sum(), rows.size]] * 2)
        mask = np.ones((2, p.bins.shape[1]), bool)
        gain, f, b, d = ref.best_split(p.bins, g, h, rows, p.n_slots, reg)
        assert f >= 0, "the problem should have a split"
        mask[1, f] = False  # the second search may not use the best feature
        # the same node searched twice, with two masks
        recs = be.find_best_splits([0, 0], totals, mask, vec)
        assert recs.shape == (2, REC_WIDTH)
        assert abs(recs[0, REC_GAIN] - gain) <= 1e-9 * abs(gain), (recs[0], gain)
        mine = ref.split_gain(p.bins, g, h, rows, p.n_slots, reg, int(recs[0, REC_FEATURE]),
                              int(recs[0, REC_BIN]), int(recs[0, REC_DEFAULT_LEFT]))
        assert abs(mine - gain) <= 1e-9 * abs(gain), (mine, gain)
        sel = rows[_split_rows(p, rows, int(recs[0, REC_FEATURE]), int(recs[0, REC_BIN]),
                               int(recs[0, REC_DEFAULT_LEFT]))]
        assert recs[0, REC_LEFT_G] == g[sel].sum() and recs[0, REC_LEFT_H] == h[sel].sum()
        masked = max((c for c in ref.split_candidates(p.bins, g, h, rows, p.n_slots, reg)
                      if c[1] != f), key=lambda c: c[0], default=(0.0, -1))
        assert int(recs[1, REC_FEATURE]) != f
        assert abs(recs[1, REC_GAIN] - max(masked[0], 0.0)) <= 1e-9 * abs(gain), recs[1]


def check_split_and_search(make: Factory, seed: int) -> None:
    """split_and_search, one step of a tree: the children's row counts, their histograms (one
    of each pair built, the other subtracted) against the reference sums, and their best
    splits (under feature masks) against brute force; one parent, then two at once, then a
    parent without rows (a split sending every row left) beside one with rows."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    g, h = p.gh[:, 0].astype(np.float64), p.gh[:, 1].astype(np.float64)
    n, n_features = p.bins.shape
    reg = ref.Reg(1.0, 0.0, 0.5, 0)
    vec = _reg(reg_lambda=1.0, min_child_weight=0.5)
    be = _with_gradients(make, p)
    be.begin_tree(0, None, None)
    be.build_histograms([0])
    members = {0: np.arange(n, dtype=np.int32)}
    slack = _slack(be, p.gh, _ref_hist(p, members[0], p.gh)[0][:, 2])
    rng = np.random.default_rng(seed + 11)

    def step(parents: list[int], recs: np.ndarray) -> np.ndarray:
        first = max(members) + 1
        lefts = list(range(first, first + 2 * len(parents), 2))
        rights = [i + 1 for i in lefts]
        children = [i for pair in zip(lefts, rights, strict=True) for i in pair]
        for j, parent in enumerate(parents):
            r = members[parent]
            sel = _split_rows(p, r, int(recs[j, REC_FEATURE]), int(recs[j, REC_BIN]),
                              int(recs[j, REC_DEFAULT_LEFT]))
            members[lefts[j]], members[rights[j]] = r[sel], r[~sel]
        sums = np.array([[g[members[c]].sum(), h[members[c]].sum()] for c in children])
        masks = rng.random((len(children), n_features)) < 0.75
        counts, got = be.split_and_search(parents, lefts, rights, recs, sums, masks, vec)
        assert counts.tolist() == [[members[lc].size, members[rc].size]
                                   for lc, rc in zip(lefts, rights, strict=True)], counts
        assert got.shape == (len(children), REC_WIDTH), got.shape
        for c, node in enumerate(children):
            r = members[node]
            want, mags = _ref_hist(p, r, p.gh)
            _assert_float_hist(be.read_histograms([node])[0], want, mags, f"node {node}", slack)
            cands = [x for x in ref.split_candidates(p.bins, g, h, r, p.n_slots, reg)
                     if masks[c, x[1]]]
            best = max((x[0] for x in cands), default=0.0)
            if best <= 0.0:
                assert got[c, REC_FEATURE] == -1, (node, got[c])
                continue
            f, b, d = (int(got[c, i]) for i in (REC_FEATURE, REC_BIN, REC_DEFAULT_LEFT))
            assert masks[c, f] and abs(got[c, REC_GAIN] - best) <= 1e-9 * best, (node, got[c])
            assert abs(ref.split_gain(p.bins, g, h, r, p.n_slots, reg, f, b, d) - best) \
                <= 1e-9 * best, (node, got[c])
            left = r[_split_rows(p, r, f, b, d)]
            assert got[c, REC_LEFT_G] == g[left].sum() and got[c, REC_LEFT_H] == h[left].sum()
        return got

    gain, f, b, d = ref.best_split(p.bins, g, h, members[0], p.n_slots, reg)
    assert f >= 0, "the problem should have a split"
    got = step([0], _record(f, b, d))
    # both children split; one by its best split if it has one
    rec1 = got[:1] if got[0, REC_FEATURE] >= 0 else _record(0, 1, 0)
    everything_left = _record(0, int(p.n_slots[0]) - 2, 1)
    got = step([1, 2], np.concatenate([rec1, everything_left]))
    assert members[6].size == 0, "node 6 should have no rows"
    step([6, 3], np.concatenate([_record(1, 0, 0), _record(n_features - 1, 1, 1)]))
    # a parent whose histogram is the subtraction of a separate split (not yet searched)
    first = max(members) + 1
    r = members[5]
    sel = _split_rows(p, r, 1, 1, 0)
    members[first], members[first + 1] = r[sel], r[~sel]
    counts = be.apply_splits([5], [first], [first + 1], _record(1, 1, 0))
    small, large = (first, first + 1) if counts[0, 0] <= counts[0, 1] else (first + 1, first)
    be.build_histograms([small])
    be.subtract_histograms([5], [small], [large])
    step([large], _record(0, 2, 1))


def check_oblivious_gains(make: Factory, seed: int) -> None:
    """The shared-split gain table of two nodes against the brute-force gains, summed."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    g, h = p.gh[:, 0].astype(np.float64), p.gh[:, 1].astype(np.float64)
    reg = ref.Reg(1.0, 0.0, 0.5, 0)
    be = _with_gradients(make, p)
    rows = np.arange(p.bins.shape[0], dtype=np.int32)
    be.begin_tree(0, None, None)
    be.build_histograms([0])
    f0, b0 = 0, 3
    counts = be.apply_splits([0], [1], [2], _record(f0, b0, 0))
    left = _split_rows(p, rows, f0, b0, 0)
    be.build_histograms([1, 2])
    members = [rows[left], rows[~left]]
    totals = np.array([[g[r].sum(), h[r].sum(), r.size] for r in members])
    assert counts.tolist() == [[members[0].size, members[1].size]]
    mask = np.ones(p.bins.shape[1], bool)
    mask[2] = False
    table = be.oblivious_gains([1, 2], totals, mask,
                               _reg(reg_lambda=1.0, min_child_weight=0.5))
    assert table.shape == (int(p.offsets[-1]), 2)
    want = np.full(table.shape, -np.inf)
    for r in members:
        for gain, f, b, d, _ in ref.split_candidates(p.bins, g, h, r, p.n_slots, reg):
            if f == 2:
                continue
            slot = int(p.offsets[f]) + b
            want[slot, d] = (0.0 if want[slot, d] == -np.inf else want[slot, d]) + gain
    # a candidate that is a valid split of no node is -inf
    np.testing.assert_array_equal(np.isneginf(table), np.isneginf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(table[finite], want[finite], rtol=1e-9, atol=1e-12)
    o = int(p.offsets[2])
    assert np.all(np.isneginf(table[o:int(p.offsets[3])])), "masked feature"


def check_monotone_split_search(make: Factory, seed: int) -> None:
    """find_best_splits and oblivious_gains under monotone constraints against the brute-force
    constrained candidates: weights clipped to each node's bounds, gains at the clipped
    weights, candidates whose children's weights go against their feature's constraint
    rejected (for a level's shared split: in any node). The constraints are set against the
    unconstrained best split, so they change the answer."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    g, h = p.gh[:, 0].astype(np.float64), p.gh[:, 1].astype(np.float64)
    n_features = p.bins.shape[1]
    rows = np.arange(p.bins.shape[0], dtype=np.int32)
    G, H = g.sum(), h.sum()
    for reg in (ref.Reg(1.0, 0.0, 0.5, 0), ref.Reg(0.5, 0.3, 1.0, 5, 0.4)):
        vec = _reg(reg_lambda=reg.reg_lambda, reg_alpha=reg.reg_alpha,
                   min_child_weight=reg.min_child_weight, min_data_in_leaf=reg.min_data_in_leaf,
                   max_delta_step=reg.max_delta_step)
        # the unconstrained best split's feature gets the constraint it breaks
        _, f0, b0, d0 = ref.best_split(p.bins, g, h, rows, p.n_slots, reg)
        assert f0 >= 0, "the problem should have a split"
        left0 = _split_rows(p, rows, f0, b0, d0)
        w0 = [ref.weight(g[s].sum(), h[s].sum(), reg) for s in (left0, ~left0)]
        cons = np.array([(1, -1, 0)[i % 3] for i in range(n_features)], np.int8)
        cons[f0] = -1 if w0[0] < w0[1] else 1
        # the root unbounded, and with bounds that clip (around its own weight)
        w_root = ref.weight(G, H, reg)
        lower = np.array([-np.inf, w_root - 0.02])
        upper = np.array([np.inf, w_root + 0.05])
        be = _with_gradients(make, p, count_rows=reg.min_data_in_leaf > 0)
        be.begin_tree(0, None, None)
        be.build_histograms([0])
        totals = np.array([[G, H, rows.size]] * 2)
        recs = be.find_best_splits([0, 0], totals, np.ones((2, n_features), bool), vec,
                                   monotone=(cons, lower, upper))
        assert recs.shape == (2, REC_WIDTH)
        for j in range(2):
            cands = [c for c in ref.monotone_candidates(p.bins, g, h, rows, p.n_slots, reg,
                                                        cons, lower[j], upper[j]) if c[4]]
            want = max((c[0] for c in cands), default=0.0)
            got = recs[j]
            if want <= 0.0:
                assert got[REC_FEATURE] == -1 and got[REC_GAIN] == 0.0, (j, got)
                continue
            assert abs(got[REC_GAIN] - want) <= 1e-9 * abs(want), (j, got, want)
            key = (int(got[REC_FEATURE]), int(got[REC_BIN]), int(got[REC_DEFAULT_LEFT]))
            mine = [c[0] for c in cands if c[1:4] == key]
            assert mine and abs(mine[0] - want) <= 1e-9 * abs(want), (j, key, mine, want)
            assert key != (f0, b0, d0), "the constraint should reject the free best split"
            sel = rows[_split_rows(p, rows, *key)]
            assert got[REC_LEFT_G] == g[sel].sum() and got[REC_LEFT_H] == h[sel].sum(), j
        # a level of two nodes, bounded as the split of the root on f0 bounds them
        counts = be.apply_splits([0], [1], [2], _record(f0, b0, d0))
        be.build_histograms([1, 2])
        members = [rows[left0], rows[~left0]]
        assert counts.tolist() == [[members[0].size, members[1].size]]
        totals = np.array([[g[r].sum(), h[r].sum(), r.size] for r in members])
        mid = 0.5 * (w0[0] + w0[1])
        lower = np.array([-np.inf, mid] if cons[f0] > 0 else [mid, -np.inf])
        upper = np.array([mid, np.inf] if cons[f0] > 0 else [np.inf, mid])
        mask = np.ones(n_features, bool)
        mask[(f0 + 1) % n_features] = False
        table = be.oblivious_gains([1, 2], totals, mask, vec, monotone=(cons, lower, upper))
        assert table.shape == (int(p.offsets[-1]), 2)
        want = np.full(table.shape, -np.inf)
        ordered = np.ones(table.shape, bool)
        for r, lo, hi in zip(members, lower, upper, strict=True):
            for gain, f, b, d, ok in ref.monotone_candidates(p.bins, g, h, r, p.n_slots, reg,
                                                             cons, lo, hi):
                slot = int(p.offsets[f]) + b
                ordered[slot, d] &= ok
                if gain != -np.inf:
                    want[slot, d] = (0.0 if want[slot, d] == -np.inf else want[slot, d]) + gain
        masked = (f0 + 1) % n_features
        want[int(p.offsets[masked]):int(p.offsets[masked + 1])] = -np.inf
        assert (~ordered & np.isfinite(want)).any(), "the constraints should reject splits"
        want[~ordered] = -np.inf
        assert np.isfinite(want).any(), "some shared split should remain"
        np.testing.assert_array_equal(np.isneginf(table), np.isneginf(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(table[finite], want[finite], rtol=1e-9, atol=1e-12)


def check_grown_tree_and_margin(make: Factory, seed: int) -> None:
    """The grower on this backend against the brute-force depth-wise tree, and the margin
    update from the leaves (all rows) and by traversal (a row sample)."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    g, h = p.gh[:, 0].astype(np.float64), p.gh[:, 1].astype(np.float64)
    params = parse_params({"max_depth": 3, "learning_rate": 0.5, "reg_alpha": 0.2,
                           "min_child_weight": 0.5})
    reg = ref.Reg(1.0, 0.2, 0.5, 0)
    be = _with_gradients(make, p)
    m0 = np.random.default_rng(seed).normal(size=(p.bins.shape[0], 1))
    be.set_margin(m0)
    grower = TreeGrower(be, params, p.mapper)
    grown = grower.grow(0, None, None, np.random.default_rng(0))
    want = ref.grow_depthwise(p.bins, g, h, p.n_slots, reg, max_depth=3, learning_rate=0.5)
    got = np.zeros((p.bins.shape[0], 1))
    PackedForest([grown.tree]).add_margin(p.X, got)
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-12, atol=1e-12)
    be.update_margin(grown.tree, *grown.margin_leaves(), 0)
    np.testing.assert_array_equal(be.margin(), m0 + got)
    # a row sample: rows outside it are updated by traversing the tree
    rows = np.arange(0, p.bins.shape[0], 3, dtype=np.int32)
    grown = grower.grow(0, rows, None, np.random.default_rng(1))
    before = be.margin().copy()
    be.update_margin(grown.tree, *grown.margin_leaves(), 0)
    add = np.zeros((p.bins.shape[0], 1))
    PackedForest([grown.tree]).add_margin(p.X, add)
    np.testing.assert_array_equal(be.margin(), before + add)


def check_best_first_batches(make: Factory, seed: int) -> None:
    """Best-first growth splitting many leaves a backend step (splits made ahead of their
    turn, some of them undone) grows the brute-force best-first tree, and the margin update
    gives the rows of an undone split its leaf's value; with gamma pruning too."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    g, h = p.gh[:, 0].astype(np.float64), p.gh[:, 1].astype(np.float64)
    m0 = np.random.default_rng(seed).normal(size=(p.bins.shape[0], 1))
    spec = {"grow_policy": "lossguide", "max_leaves": 8, "max_depth": 0, "learning_rate": 0.5,
            "reg_alpha": 0.2, "min_child_weight": 0.5}

    def grow(gamma: float):
        be = _with_gradients(make, p)
        be.set_margin(m0)
        grower = TreeGrower(be, parse_params({**spec, "gamma": gamma}), p.mapper)
        grower.best_first_batch = 64
        grown = grower.grow(0, None, None, np.random.default_rng(0))
        be.update_margin(grown.tree, *grown.margin_leaves(), 0)
        got = np.zeros((p.bins.shape[0], 1))
        PackedForest([grown.tree]).add_margin(p.X, got)
        np.testing.assert_array_equal(be.margin(), m0 + got)
        return grown, got[:, 0]

    grown, got = grow(0.0)
    assert any(len(held) > 1 for held in grown.leaves), \
        "no split was made ahead and undone: the check would not bind"
    want = mref.grow_lossguide(p.bins, g, h, p.n_slots, ref.Reg(1.0, 0.2, 0.5, 0), 8, 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # gamma just above the smallest gain of a split into two leaves: it is pruned
    t = grown.tree
    inner = np.flatnonzero(t.left_child >= 0)
    last = inner[(t.left_child[t.left_child[inner]] < 0)
                 & (t.left_child[t.right_child[inner]] < 0)]
    pruned, _ = grow(float(t.gain[last].min()) * (1 + 1e-9))
    assert pruned.tree.n_leaves < 8, "gamma should prune"


def check_pruned_tree_margin(make: Factory, seed: int) -> None:
    """Gamma pruning makes a leaf of a node whose children the backend split unevenly (one
    child split further, the other a leaf): the margin update gives the rows of every
    backend node below it the leaf's value."""
    p = make_problem(seed, exact_gradients=True, weighted=False)
    m0 = np.random.default_rng(seed).normal(size=(p.bins.shape[0], 1))
    spec = {"max_depth": 4, "learning_rate": 0.5, "min_child_weight": 2}

    def grow(gamma: float):
        be = _with_gradients(make, p)
        be.set_margin(m0)
        grower = TreeGrower(be, parse_params({**spec, "gamma": gamma}), p.mapper)
        grown = grower.grow(0, None, None, np.random.default_rng(0))
        be.update_margin(grown.tree, *grown.margin_leaves(), 0)
        return grown.tree, be.margin()

    t, _ = grow(0.0)
    left, right = t.left_child, t.right_child
    parent = np.full(left.shape[0], -1)
    inner = np.flatnonzero(left >= 0)
    parent[left[inner]] = parent[right[inner]] = inner

    def uneven_leaf(gamma: float) -> bool:
        """Whether pruning at gamma leaves a leaf whose children had one split child."""
        leaf = left < 0
        for i in inner[::-1]:  # children after their parent
            leaf[i] = leaf[left[i]] and leaf[right[i]] and t.gain[i] < gamma
        return any(leaf[i] and (parent[i] < 0 or not leaf[parent[i]])
                   and (left[left[i]] < 0) != (left[right[i]] < 0) for i in inner)

    gamma = next((g for g in np.sort(t.gain[inner]) * (1 + 1e-9) if uneven_leaf(g)), None)
    assert gamma is not None, "no gamma prunes a split of the shape the check needs"
    tree, margin = grow(float(gamma))
    assert tree.n_leaves < t.n_leaves
    got = np.zeros((p.bins.shape[0], 1))
    PackedForest([tree]).add_margin(p.X, got)
    np.testing.assert_array_equal(margin, m0 + got)


CHECKS = [check_gradients, check_root_histogram, check_quantised_histograms,
          check_partition_and_subtraction, check_split_search, check_split_and_search,
          check_oblivious_gains,
          check_monotone_split_search, check_grown_tree_and_margin,
          check_best_first_batches, check_pruned_tree_margin]
