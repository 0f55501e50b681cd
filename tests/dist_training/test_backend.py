"""`DistributedBackend`: the backend conformance suite on one worker, and quantised trees
grown on 2 and 3 threads-as-workers (rows split unevenly) equal to the tree of one process on
all rows, with each worker's margins equal to that process's margins of its rows."""

from __future__ import annotations

import numpy as np
import pytest

from histboost.collective import CollectiveError, SingleCommunicator
from histboost.collective.testing import run_threads
from histboost.distributed import DistributedBackend
from histboost.kernels.cpu.backend import CPUBackend
from histboost.params import parse_params
from histboost.testing.conformance import CHECKS, make_problem
from histboost.tree.grower import TreeGrower
from histboost.tree.quantize import make_quantisation, round_key
from histboost.tree.split import REC_BIN, REC_FEATURE, REC_WIDTH

# -- (a) conformance on one worker -------------------------------------------------------


def _single(n_threads):
    def make(bins, offsets, **kw):
        return DistributedBackend(CPUBackend(bins, offsets, n_threads, pack=False, **kw),
                                  SingleCommunicator())
    return make


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_conformance_one_worker(check, n_threads):
    check(_single(n_threads), 0)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_conformance_world_size_one_thread_comm(check):
    """The same checks through a `DistributedCommunicator` of world size 1."""
    def body(comm):
        def make(bins, offsets, **kw):
            return DistributedBackend(CPUBackend(bins, offsets, 1, pack=False, **kw), comm)
        check(make, 1)
    run_threads(1, body)


def test_packed_local_backend_is_refused():
    p = make_problem(0, n=50)
    with pytest.raises(ValueError, match="pack=False"):
        DistributedBackend(CPUBackend(p.bins, p.offsets, 1), SingleCommunicator())


# -- (b) several workers: the tree of one process ----------------------------------------

SEED = 3
N = 900
POLICIES = {
    "depthwise": {"max_depth": 4},
    "lossguide": {"grow_policy": "lossguide", "max_leaves": 10, "max_depth": 0},
    "oblivious": {"grow_policy": "oblivious", "max_depth": 3},
    "depthwise_min_data": {"max_depth": 5, "min_data_in_leaf": 40},
    "lossguide_min_data": {"grow_policy": "lossguide", "max_leaves": 12, "min_data_in_leaf": 30},
}


def _problem(n_outputs: int):
    """A problem with K outputs' gradient pairs (float32 (K, n, 2)); the largest |g| and |h|
    sit in one row each, well above the rest, so a worker without them would pick a finer
    quantisation scale than the global one."""
    p = make_problem(SEED, n=N, n_features=6, max_bin=16, weighted=False)
    rng = np.random.default_rng(SEED)
    pairs = np.empty((n_outputs, N, 2), np.float32)
    for k in range(n_outputs):
        pairs[k, :, 0] = rng.normal(size=N) + 1.5 * (p.bins[:, k % 6] < 5)
        pairs[k, :, 1] = rng.random(N) + 0.1
        pairs[k, 11, 0] = -25.0
        pairs[k, N - 17, 1] = 9.0
    return p, pairs


def _shares(world: int, layout: str) -> list[np.ndarray]:
    """Uneven row subsets of 0..N-1 (int64, sorted), one per rank."""
    if layout == "contiguous":
        cuts = np.round(np.cumsum([0] + [k + 1 for k in range(world)])
                        / (world * (world + 1) / 2) * N).astype(int)
        return [np.arange(cuts[r], cuts[r + 1]) for r in range(world)]
    # random assignment, rank r drawing weight r + 1: neither contiguous nor even
    owner = np.random.default_rng(7).choice(world, size=N,
                                            p=np.arange(1, world + 1) / (world * (world + 1) / 2))
    return [np.flatnonzero(owner == r) for r in range(world)]


def _grow(backend, p, pairs, params, margin0, best_first_batch=None):
    """One quantised tree per output, as `train()` grows round 0; returns the trees' dicts
    and the backend's margins after the updates. best_first_batch: the grower's (None: its
    default)."""
    backend.set_margin(margin0)
    backend.set_gradients(pairs)
    grower = TreeGrower(backend, params, p.mapper)
    if best_first_batch is not None:
        grower.best_first_batch = best_first_batch
    trees = []
    for k in range(pairs.shape[0]):
        q = make_quantisation(*backend.gradient_bounds(k), params.grad_quant_bits,
                              round_key(params.seed, 0, k))
        grown = grower.grow(k, None, q, np.random.default_rng(0))
        backend.update_margin(grown.tree, *grown.margin_leaves(), k)
        trees.append(grown.tree.to_dict())
    return trees, backend.margin()


class _Skip(DistributedBackend):
    """A broken wrapper that skips one reduction (to show the tests would catch it)."""

    skip = ""

    def gradient_bounds(self, output):
        if self.skip == "bounds":
            return self.local.gradient_bounds(output)
        return super().gradient_bounds(output)

    def begin_tree(self, output, rows, quantisation):
        if self.skip == "root_count":
            return self.local.begin_tree(output, rows, quantisation)
        return super().begin_tree(output, rows, quantisation)

    def build_histograms(self, nodes):
        if self.skip == "histograms":
            return self.local.build_histograms(nodes)
        return super().build_histograms(nodes)

    def apply_splits(self, parents, lefts, rights, records):
        if self.skip == "child_counts":
            return self.local.apply_splits(parents, lefts, rights, records)
        return super().apply_splits(parents, lefts, rights, records)


def _check_workers(world: int, layout: str, policy: str, n_outputs: int = 1,
                   skip: str = "", timeout: float = 30.0, pack_rows: int = 0,
                   divide_search: bool | None = None,
                   one_leaf_a_step: bool = False, full_search_slots: int | None = None
                   ) -> None:
    p, pairs = _problem(n_outputs)
    params = parse_params({"quantized_grad": True, "learning_rate": 0.3, "seed": 5,
                           **POLICIES[policy]})
    count_rows = params.min_data_in_leaf > 0
    margin0 = np.random.default_rng(1).normal(size=(N, n_outputs))
    # one process on all rows, with the default (packed when it fits) histograms
    one = CPUBackend(p.bins, p.offsets, 2, n_outputs=n_outputs, count_rows=count_rows)
    want_trees, want_margin = _grow(one, p, pairs, params, margin0,
                                    1 if one_leaf_a_step else None)
    assert any(t.get("split_feature", t.get("level_feature")) for t in want_trees)
    assert sum(len(t.get("value", t.get("leaf_value", []))) for t in want_trees) > 2 * n_outputs
    shares = _shares(world, layout)

    def body(comm):
        rows = shares[comm.rank]
        local = CPUBackend(np.ascontiguousarray(p.bins[rows]), p.offsets, 1,
                           n_outputs=n_outputs, count_rows=count_rows,
                           pack=pack_rows > 0, pack_rows=pack_rows,
                           row_ids=None if skip == "row_ids" else rows)
        kw = {} if full_search_slots is None else {"full_search_slots": full_search_slots}
        be = _Skip(local, comm, divide_search=divide_search, **kw)
        assert be.divide_search is bool(divide_search)  # threads share no memory segment
        be.skip = skip
        grown = _grow(be, p, np.ascontiguousarray(pairs[:, rows]), params, margin0[rows])
        # the layout the workers chose: packed (one int64 a slot) exactly when asked to
        assert (local.gh.ndim == 1) == (pack_rows > 0 and not count_rows)
        return grown

    results = run_threads(world, body, timeout=timeout)
    for rank, (trees, margin) in enumerate(results):
        assert trees == want_trees, f"rank {rank}: tree differs from one process's"
        np.testing.assert_array_equal(margin, want_margin[shares[rank]],
                                      err_msg=f"rank {rank}: margins")


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("world,layout", [(2, "contiguous"), (3, "random")])
def test_quantised_tree_equals_one_process(world, layout, policy):
    _check_workers(world, layout, policy)


@pytest.mark.parametrize("policy", ["depthwise", "lossguide", "oblivious"])
def test_packed_histograms_equal_one_process(policy):
    """Local backends that pack (gradient and hessian in one int64) by the bound on all
    workers' rows: their summed histograms give the one-process tree too."""
    _check_workers(3, "random", policy, pack_rows=N)


@pytest.mark.parametrize("full_search_slots", [0, 200])
@pytest.mark.parametrize("policy", ["depthwise", "lossguide_min_data", "oblivious"])
def test_divided_search_equals_one_process(policy, full_search_slots):
    """"data" with each worker searching its feature block (what CPU workers sharing memory
    do by default): the allgathered best records give the one-process tree. Steps of more
    than full_search_slots histogram slots (96 a node here) reduce each worker's block only
    (`Communicator.reduce_blocks`), smaller ones are reduced and searched whole (0: none;
    200: the root and its children), and children of partial histograms stay partial."""
    _check_workers(3, "random", policy, pack_rows=N, divide_search=True,
                   full_search_slots=full_search_slots)


@pytest.mark.parametrize("policy", ["depthwise", "lossguide_min_data", "oblivious"])
def test_multiclass_trees_equal_one_process(policy):
    _check_workers(3, "contiguous", policy, n_outputs=3)


@pytest.mark.parametrize("policy", ["lossguide", "lossguide_min_data"])
def test_best_first_batches_equal_one_process_one_leaf_a_step(policy):
    """Workers splitting many leaves a step (best-first splits made ahead, some undone) grow
    the tree and margins of one process splitting one leaf a step."""
    _check_workers(3, "random", policy, n_outputs=2, one_leaf_a_step=True)


@pytest.mark.parametrize("skip", ["bounds", "root_count", "histograms", "child_counts",
                                  "row_ids"])
def test_skipping_a_reduction_is_caught(skip):
    """Each reduction (and rounding at global row indices) is needed: without it the check
    above fails (a mismatch, or ranks that diverge and time out)."""
    policy = "depthwise_min_data" if skip == "child_counts" else "depthwise"
    with pytest.raises((AssertionError, CollectiveError)):
        _check_workers(2, "contiguous", policy, skip=skip, timeout=2.0)


def test_float_histograms_are_global_sums():
    """Float trees: every rank's root and child histograms (built and subtracted) are the
    one-process histograms up to float64 rounding, and the child counts are global."""
    p, pairs = _problem(1)
    shares = _shares(3, "random")
    one = CPUBackend(p.bins, p.offsets, 1, count_rows=True)
    one.set_gradients(pairs)
    one.begin_tree(0, None, None)
    one.build_histograms([0])
    rec = np.zeros((1, REC_WIDTH))
    rec[0, REC_FEATURE], rec[0, REC_BIN] = 2, 4
    want_counts = one.apply_splits([0], [1], [2], rec)
    one.build_histograms([1])
    one.subtract_histograms([0], [1], [2])
    want = one.read_histograms([1, 2])

    def body(comm):
        rows = shares[comm.rank]
        be = DistributedBackend(CPUBackend(np.ascontiguousarray(p.bins[rows]), p.offsets, 1,
                                           count_rows=True, pack=False, row_ids=rows), comm)
        be.set_gradients(np.ascontiguousarray(pairs[:, rows]))
        n = be.begin_tree(0, None, None)
        be.build_histograms([0])
        counts = be.apply_splits([0], [1], [2], rec)
        be.build_histograms([1])
        be.subtract_histograms([0], [1], [2])
        return n, counts, be.read_histograms([1, 2])

    for n, counts, got in run_threads(3, body):
        assert n == N
        np.testing.assert_array_equal(counts, want_counts)
        np.testing.assert_array_equal(got[..., 2], want[..., 2])
        np.testing.assert_allclose(got[..., :2], want[..., :2], rtol=1e-9, atol=1e-9)


def test_best_records_is_better_split_folded():
    """The vectorised choice among workers' records equals folding `better_split`."""
    from histboost.distributed.backend import best_records
    from histboost.tree.split import better_split

    rng = np.random.default_rng(0)
    for _ in range(200):
        W, k = int(rng.integers(1, 5)), int(rng.integers(1, 6))
        c = np.zeros((W, k, REC_WIDTH))
        c[..., 0] = rng.integers(0, 3, (W, k))  # few gains: ties are common
        c[..., 1] = rng.integers(-1, 4, (W, k))
        c[..., 2] = rng.integers(0, 3, (W, k))
        got = best_records(c)
        for j in range(k):
            want = c[0, j]
            for w in range(1, W):
                want = better_split(want, c[w, j])
            np.testing.assert_array_equal(got[j], want)


def test_fixed_point_backends_get_the_global_bounds():
    """A local backend that sums float trees in fixed point (row_rounding > 0, the GPU's)
    is given the gradient bounds of all workers at begin_tree, so every worker scales alike;
    quantised trees and float-summing backends are given none."""
    p, pairs = _problem(1)
    shares = _shares(2, "contiguous")
    want = tuple(float(np.abs(pairs[0, :, c]).max()) for c in (0, 1))

    class FixedPoint(CPUBackend):
        row_rounding = 2.0**-19
        seen: list = []

        def begin_tree(self, output, rows, quantisation, bounds=None):
            self.seen.append(bounds)
            return super().begin_tree(output, rows, quantisation, bounds)

    def body(comm):
        rows = shares[comm.rank]
        local = FixedPoint(np.ascontiguousarray(p.bins[rows]), p.offsets, 1, pack=False,
                           row_ids=rows)
        local.seen = []
        be = DistributedBackend(local, comm)
        be.set_gradients(np.ascontiguousarray(pairs[:, rows]))
        be.begin_tree(0, None, None)
        q = make_quantisation(*be.gradient_bounds(0), 8, 1)
        be.begin_tree(0, None, q)
        return local.seen

    for seen in run_threads(2, body):
        assert seen == [want, None]
