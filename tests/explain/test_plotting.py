"""Plots render to PNG under Agg, and what was drawn is checked: bars, node texts, lines,
points."""

from __future__ import annotations

import numpy as np
import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import histboost  # noqa: E402
from histboost import plotting  # noqa: E402
from histboost.testing.data import make_classification  # noqa: E402


@pytest.fixture(scope="module")
def trained():
    X, y = make_classification(600, 5, n_classes=2, seed=1)
    d = histboost.Dataset(X[:400], label=y[:400], feature_names=list("abcde"))
    dv = histboost.Dataset(X[400:], label=y[400:], feature_names=list("abcde"))
    evals = {}
    b = histboost.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1,
                         "eval_metric": ["logloss", "error"]}, d, 6,
                        evals=[(d, "train"), (dv, "valid")], evals_result=evals,
                        verbose_eval=False)
    return b, X, evals


def _png(ax, tmp_path):
    path = tmp_path / "plot.png"
    ax.figure.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt.close(ax.figure)


def test_plot_importance_bars(trained, tmp_path):
    b, _, _ = trained
    score = b.get_score("gain")
    ax = plotting.plot_importance(b, importance_type="gain")
    bars = [p for p in ax.patches if isinstance(p, mpl.patches.Rectangle)]
    assert len(bars) == len(score)
    widths = sorted(p.get_width() for p in bars)
    np.testing.assert_allclose(widths, sorted(score.values()))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == max(score, key=score.get)  # the largest on top
    _png(ax, tmp_path)
    ax = plotting.plot_importance(b, max_num_features=2)
    assert len(ax.patches) == 2
    _png(ax, tmp_path)


@pytest.mark.parametrize("policy", ["depthwise", "oblivious"])
def test_plot_tree_node_texts(trained, tmp_path, policy):
    b, X, _ = trained
    if policy == "oblivious":
        b = histboost.train({"objective": "binary:logistic", "grow_policy": "oblivious",
                             "max_depth": 2, "nthread": 1},
                            histboost.Dataset(X, label=(X[:, 0] > 0).astype(float)), 2,
                            verbose_eval=False)
    df = b.trees_to_dataframe()
    t1 = df[df.Tree == 1]
    ax = plotting.plot_tree(b, tree_idx=1)
    splits = [t.get_text() for t in ax.texts if t.get_gid() == "split"]
    leaves = [t.get_text() for t in ax.texts if t.get_gid() == "leaf"]
    edges = [t.get_text() for t in ax.texts if t.get_gid() == "edge"]
    inner = t1[t1.Feature != "Leaf"]
    assert len(splits) == len(inner) and len(leaves) == (t1.Feature == "Leaf").sum()
    assert sorted(splits) == sorted(f"{f}<={s:.4g}"
                                    for f, s in zip(inner.Feature, inner.Split, strict=True))
    assert sorted(leaves) == sorted(f"leaf={v:.4g}" for v in t1[t1.Feature == "Leaf"].Gain)
    assert len(edges) == 2 * len(inner)
    assert sum("missing" in e for e in edges) == len(inner)
    _png(ax, tmp_path)


def test_to_graphviz(trained):
    pytest.importorskip("graphviz")
    b, _, _ = trained
    g = plotting.to_graphviz(b, tree_idx=0)
    df = b.trees_to_dataframe()
    t0 = df[df.Tree == 0]
    src = g.source
    assert src.count("->") == 2 * (t0.Feature != "Leaf").sum()
    assert src.count("leaf=") == (t0.Feature == "Leaf").sum()


def test_plot_metric_lines(trained, tmp_path):
    _, _, evals = trained
    ax = plotting.plot_metric(evals, metric="error")
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["train", "valid"]
    np.testing.assert_allclose(lines[1].get_ydata(), evals["valid"]["error"])
    assert ax.get_ylabel() == "error"
    _png(ax, tmp_path)
    with pytest.raises(ValueError, match="metric"):
        plotting.plot_metric(evals, metric="auc")


def test_plot_shap_summary_points(trained, tmp_path):
    b, X, _ = trained
    sv = b.predict(X, pred_contribs=True)
    ax = plotting.plot_shap_summary(sv, X, feature_names=list("abcde"), max_display=3)
    colls = ax.collections
    assert len(colls) == 3 and all(len(c.get_offsets()) == X.shape[0] for c in colls)
    top = np.argsort(np.abs(sv[:, :-1]).mean(0))[::-1][:3]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["abcde"[i] for i in top[::-1]]
    # x positions are the SHAP values of the feature on that row
    np.testing.assert_allclose(np.sort(colls[-1].get_offsets()[:, 0]), np.sort(sv[:, top[0]]))
    _png(ax, tmp_path)
