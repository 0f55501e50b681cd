"""Under a communicator: leaf-refresh objectives (absolute and quantile error) get each leaf's
quantile and the intercept from the rows of all ranks (an exact distributed selection,
checked against `weighted_quantile` on all values), and custom metrics see the evaluation set
of all ranks; both give one process's model and metric log."""

from __future__ import annotations

import numpy as np
import pytest

import histboost as hb
from histboost.collective.testing import run_threads
from histboost.distributed.quantile import decode, encode, global_quantiles
from histboost.objectives.regression import weighted_quantile

from .test_training import _blocks, _data, _strip, _train_ranks


def test_codes_keep_the_order_of_floats():
    v = np.array([-np.inf, -1e300, -2.5, -1e-310, -0.0, 0.0, 1e-310, 3.0, 1e300, np.inf])
    codes = encode(v)
    assert np.all(codes[1:] >= codes[:-1]) and codes[4] == codes[5]
    assert np.array_equal(decode(codes), v + 0.0)


@pytest.mark.parametrize("weighted", [False, True])
def test_global_quantiles_equal_one_process(weighted):
    rng = np.random.default_rng(1)
    for trial in range(40):
        n, groups = int(rng.integers(1, 60)), int(rng.integers(1, 4))
        values = rng.normal(size=n) if trial % 2 else np.round(rng.normal(size=n), 1)  # ties
        g = rng.integers(0, groups, n)
        # integer weights, zeros included: their sums are exact in any order
        w = rng.integers(0, 4, n).astype(np.float64) if weighted else None
        alpha = float(rng.choice([0.0, 0.05, 0.5, 0.9, 1.0, rng.random()]))
        world = int(rng.integers(1, 4))
        shares = np.array_split(rng.permutation(n), world)  # any placement of the rows

        def body(comm, shares=shares, g=g, values=values, w=w, alpha=alpha, groups=groups):
            i = shares[comm.rank]
            return global_quantiles(comm, g[i], values[i], None if w is None else w[i],
                                    groups, alpha)

        want = [weighted_quantile(values[g == j], alpha, None if w is None else w[g == j])
                for j in range(groups)]
        for got in run_threads(world, body):
            np.testing.assert_array_equal(got, want, err_msg=f"trial {trial}")


@pytest.mark.parametrize("objective,extra", [
    ("reg:absoluteerror", {"max_depth": 3}),
    ("reg:quantileerror", {"quantile_alpha": 0.3, "max_depth": 3, "subsample": 0.8}),
    ("reg:absoluteerror", {"grow_policy": "oblivious", "max_depth": 2}),
])
@pytest.mark.parametrize("world", [2, 3])
def test_leaf_refresh_model_equals_one_process(world, objective, extra):
    X, y = _data("reg:squarederror")
    params = {"objective": objective, "quantized_grad": True, "learning_rate": 0.5,
              "seed": 4, "nthread": 1, **extra}
    full, models = _train_ranks(params, X, y, world)
    want = _strip(hb.train(params, full, 4, verbose_eval=False).to_dict())
    for rank, got in enumerate(models):
        assert _strip(got) == want, f"rank {rank}: model differs from one process's"


def test_weighted_leaf_refresh_model_equals_one_process():
    X, y = _data("reg:squarederror")
    w = np.random.default_rng(2).integers(1, 4, len(y)).astype(np.float64)
    params = {"objective": "reg:absoluteerror", "quantized_grad": True, "max_depth": 3,
              "nthread": 1}
    full = hb.Dataset(X, label=y, weight=w)
    full.construct()
    blocks = _blocks(2)

    def body(comm):
        b = blocks[comm.rank]
        d = hb.Dataset(X[b], label=y[b], weight=w[b], reference=full)
        return _strip(hb.train(params, d, 3, comm=comm).to_dict())

    want = _strip(hb.train(params, full, 3).to_dict())
    assert all(got == want for got in run_threads(2, body))


def _weighted_error(pred, data):
    """A custom metric reading the labels and weights of the set it is given."""
    y, w = data.get_label(), data.get_weight()
    return "werr", float(np.sum(w * ((pred > 0.5) != y)) / np.sum(w))


def test_custom_metric_sees_the_set_of_all_ranks():
    X, y = _data("binary:logistic")
    Xt, yt = (a[:300] for a in _data("binary:logistic", seed=12))
    wt = np.random.default_rng(3).integers(1, 5, 300).astype(np.float64)
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 3,
              "learning_rate": 1.0, "nthread": 1, "disable_default_eval_metric": True}
    full = hb.Dataset(X, label=y)
    full.construct()
    want_log: dict = {}
    want = hb.train(params, full, 20, evals=[(hb.Dataset(Xt, label=yt, weight=wt,
                                                          reference=full), "test")],
                    evals_result=want_log, verbose_eval=False, custom_metric=_weighted_error,
                    early_stopping_rounds=2)
    assert want.best_iteration < 19  # early stopping on the custom metric happened
    blocks, test_blocks = _blocks(3), np.array_split(np.arange(300), 3)

    def body(comm):
        b, tb = blocks[comm.rank], test_blocks[comm.rank]
        log: dict = {}
        bst = hb.train(params, hb.Dataset(X[b], label=y[b], reference=full), 20,
                       evals=[(hb.Dataset(Xt[tb], label=yt[tb], weight=wt[tb], reference=full),
                               "test")], evals_result=log, verbose_eval=False, comm=comm,
                       custom_metric=_weighted_error, early_stopping_rounds=2)
        return bst.best_iteration, log

    for best, log in run_threads(3, body):
        assert best == want.best_iteration
        assert log == want_log
