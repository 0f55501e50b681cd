"""Files the package writes (`histboost._files.atomic_write` and every writer that uses it:
`Booster.save_model`, the estimators' `save_model`, the CLI's model, prediction and dump files)
get what a plain ``open(path, "w")`` would give: umask permissions for a new file, the old mode
for an overwrite, a symlink's target updated with the link kept, and a missing folder reported
under the path the caller gave (issue 18, defects 12 and 13)."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import histboost as hb
from histboost._files import atomic_write
from histboost.cli import main

UMASK = 0o027  # unlike both mkstemp's 0600 and the usual 022, so a test tells them apart
RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 3))
Y = (X[:, 0] > 0).astype(float)


@pytest.fixture(autouse=True)
def umask():
    old = os.umask(UMASK)
    yield
    os.umask(old)


@pytest.fixture(scope="module")
def booster():
    return hb.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 1},
                    hb.Dataset(X, label=Y), 2, verbose_eval=False)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "train.csv"
    np.savetxt(path, np.column_stack([Y, X]), delimiter=",", fmt="%.17g")
    return str(path)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _writers(booster, data_file, tmp_path):
    """name -> function writing to a path (every writer of the package)."""
    from histboost.sklearn import HistBoostClassifier

    est = HistBoostClassifier(n_estimators=2, max_depth=2, n_jobs=1).fit(X, Y)
    model = tmp_path / "given-model.json"
    booster.save_model(model)

    def cli(*argv):
        def write(path):
            assert main([*argv, str(path)]) == 0
        return write

    return {
        "atomic_write": lambda p: atomic_write(p, "text\n"),
        "Booster.save_model": booster.save_model,
        "estimator.save_model": est.save_model,
        "cli train": cli("train", data_file, "--num-round", "1", "--quiet", "--param",
                         "nthread=1", "--model-out"),
        "cli predict": cli("predict", str(model), data_file, "--label-column", "0",
                           "--out"),
        "cli dump": cli("dump", str(model), "--out"),
    }


WRITERS = ["atomic_write", "Booster.save_model", "estimator.save_model", "cli train",
           "cli predict", "cli dump"]


@pytest.mark.parametrize("writer", WRITERS)
def test_new_file_gets_umask_permissions(booster, data_file, tmp_path, writer):
    write = _writers(booster, data_file, tmp_path)[writer]
    path = tmp_path / "out.txt"
    write(path)
    assert _mode(path) == 0o666 & ~UMASK  # 0640, not mkstemp's 0600
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("mode", [0o444, 0o664, 0o600])
def test_overwrite_keeps_the_mode(booster, data_file, tmp_path, writer, mode):
    write = _writers(booster, data_file, tmp_path)[writer]
    path = tmp_path / "out.txt"
    path.write_text("old")
    os.chmod(path, mode)
    write(path)
    assert _mode(path) == mode
    assert path.read_bytes() != b"old"


@pytest.mark.parametrize("writer", WRITERS)
def test_symlink_target_is_updated_and_the_link_stays(booster, data_file, tmp_path, writer):
    write = _writers(booster, data_file, tmp_path)[writer]
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() != b"old" and link.read_bytes() == target.read_bytes()
    assert sorted(os.listdir(tmp_path / "real")) == ["out.txt"]


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "new.txt")
    atomic_write(link, b"abc")
    assert link.is_symlink() and (tmp_path / "new.txt").read_bytes() == b"abc"


@pytest.mark.parametrize("writer", ["atomic_write", "Booster.save_model",
                                    "estimator.save_model"])
def test_missing_folder_names_the_target(booster, data_file, tmp_path, writer):
    write = _writers(booster, data_file, tmp_path)[writer]
    path = tmp_path / "nope" / "out.json"
    with pytest.raises(FileNotFoundError) as info:
        write(path)
    assert str(path) in str(info.value) and ".tmp" not in str(info.value)
    assert info.value.filename == str(path)


@pytest.mark.parametrize("command", ["train", "predict", "dump"])
def test_cli_missing_folder_names_the_target(booster, data_file, tmp_path, capsys, command):
    model = tmp_path / "m.json"
    booster.save_model(model)
    out = str(tmp_path / "nope" / "out.txt")
    argv = {"train": ["train", data_file, "--model-out", out],
            "predict": ["predict", str(model), data_file, "--label-column", "0", "--out", out],
            "dump": ["dump", str(model), "--out", out]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert out in err and ".tmp" not in err and err.count("\n") == 1


def test_folder_as_target_and_str_data(tmp_path):
    with pytest.raises(IsADirectoryError, match="folder"):
        atomic_write(tmp_path, b"x")
    atomic_write(tmp_path / "u.txt", "é\n")
    assert (tmp_path / "u.txt").read_bytes() == "é\n".encode()


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_bytes(b"old")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["f.txt"]


def test_error_creating_the_temporary_names_the_target(tmp_path, monkeypatch):
    # a read-only folder (simulated: the tests may run as root, who ignores permissions)
    real_open = os.open

    def denied(path, flags, mode=0o777, **kw):
        if str(path).endswith(".tmp"):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(PermissionError) as info:
        atomic_write(tmp_path / "m.json", b"x")
    assert info.value.filename == str(tmp_path / "m.json") and ".tmp" not in str(info.value)
