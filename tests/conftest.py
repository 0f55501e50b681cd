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




def _simulator_script(item: pytest.Item):
    module = getattr(item, "module", None)
    return getattr(module, "SIMULATOR_SCRIPT", None)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """The CUDA simulator suites' tests (modules naming a `SIMULATOR_SCRIPT`) run last: their
    scripts run in the background meanwhile (`pytest_collection_finish`)."""
    items.sort(key=lambda item: _simulator_script(item) is not None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the CUDA simulator suites of the collected tests, one fewer at a time than the
    machine has cores, beside the other tests (`histboost.testing.simulator`)."""
    if session.config.option.collectonly:
        return
    from histboost.testing.simulator import start_scripts
    scripts = []
    for item in session.items:
        script = _simulator_script(item)
        if script is not None and script not in scripts:
            scripts.append(script)
    if scripts:
        start_scripts(scripts)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the simulator suites still running (a session stopped early: -x, Ctrl-C)."""
    from histboost.testing.simulator import stop_scripts
    stop_scripts()
