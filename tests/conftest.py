"""Shared fixtures: real data bundled with the package and small synthetic sets."""

from __future__ import annotations

import pytest

from histboost.datasets import load_higgs_sample


@pytest.fixture(scope="session")
def higgs():
    """(X, y, Xt, yt) of the bundled HIGGS sample."""
    X, y = load_higgs_sample("train")
    Xt, yt = load_higgs_sample("test")
    return X, y, Xt, yt

