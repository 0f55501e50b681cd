"""Registers the ``timeout`` marker when pytest-timeout is missing (the launched process
groups carry their own hard deadlines, see _coll_harness.py)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): hard per-test time limit")
