"""One boosting round of the engine against the float64 brute-force reference
(`histboost.testing.reference`), missing values included. The backend steps (histograms, split
search) are checked against the same reference by the conformance suite."""

from __future__ import annotations

import numpy as np
import pytest

import histboost
from histboost.testing import reference as ref
from histboost.testing.data import make_regression

REG = ref.Reg(reg_lambda=1.0, reg_alpha=0.3, min_child_weight=0.5, min_data_in_leaf=3)


def _engine_inputs(X, y, max_bin=16):
    d = histboost.Dataset(X, label=y, max_bin=max_bin).construct()
    m = d.bin_mapper
    g = (np.mean(y) - y)  # squared error at the mean
    h = np.ones_like(y)
    return d, m, g, h


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_one_round_tree_matches_reference(missing):
    X, y = make_regression(300, 3, seed=5, missing=missing)
    y = np.round(y * 64) / 64  # exact float32 gradients
    d, m, _, _ = _engine_inputs(X, y)
    params = {"max_depth": 3, "learning_rate": 0.5, "base_score": 0.0, "max_bin": 16,
              "reg_lambda": REG.reg_lambda, "reg_alpha": REG.reg_alpha,
              "min_child_weight": REG.min_child_weight, "min_data_in_leaf": REG.min_data_in_leaf}
    booster = histboost.train(params, d, num_boost_round=1, verbose_eval=False)
    got = booster.predict(X)
    want = ref.grow_depthwise(d.bins, -y, np.ones_like(y), m.n_bins, REG, max_depth=3,
                              learning_rate=0.5)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # training margins (from the partition) equal a traversal of the raw values
    assert booster.num_boosted_rounds() == 1
