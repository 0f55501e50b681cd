"""The command line against the Python API: a model trained by ``histboost train`` equals one
trained by `histboost.train`, and ``histboost predict`` writes what `Booster.predict` returns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import histboost as hb
from histboost.cli import main
from histboost.data import read_csv, read_libsvm

DATA = resources.files("histboost.datasets") / "data"
HIGGS_TRAIN, HIGGS_TEST = str(DATA / "binary.train.gz"), str(DATA / "binary.test.gz")
MULTI_TRAIN, MULTI_TEST = str(DATA / "multiclass.train.gz"), str(DATA / "multiclass.test.gz")
RANK = str(Path(__file__).parent / "data" / "files" / "rank.sample.svm")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_and_predict_match_python_api(tmp_path, capsys):
    model = tmp_path / "model.json"
    code, out, err = run(capsys, "train", HIGGS_TRAIN, "--label-column", "0",
                         "--param", "objective=binary:logistic", "max_depth=4",
                         "--param", "eta=0.2", "nthread=1", "--num-round", "7",
                         "--model-out", str(model))
    assert code == 0, err
    assert out.count("train-logloss:") == 7  # one progress line per round
    assert "trained 7 rounds" in err and model.exists()

    train = read_csv(HIGGS_TRAIN)
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.2, "nthread": 1}
    ref = hb.train(params, train.to_dataset(), num_boost_round=7, verbose_eval=False)
    test = read_csv(HIGGS_TEST)
    for flags, want in [((), ref.predict(test.X)),
                        (("--margin",), ref.predict(test.X, output_margin=True)),
                        (("--leaf",), ref.predict(test.X, pred_leaf=True))]:
        preds = tmp_path / "preds.txt"
        code, _, err = run(capsys, "predict", str(model), HIGGS_TEST, "--label-column", "0",
                           "--out", str(preds), *flags)
        assert code == 0, err
        got = np.loadtxt(preds, ndmin=1 if want.ndim == 1 else 2)
        np.testing.assert_array_equal(got, want)  # %.17g reads back bit-exactly
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".histboost-")]


def test_multiclass_valid_and_early_stopping(tmp_path, capsys):
    model = tmp_path / "multi.json"
    code, out, err = run(capsys, "train", MULTI_TRAIN, "--param", "objective=multi:softprob",
                         "num_class=5", "eval_metric=merror,mlogloss", "eta=0.5", "nthread=1",
                         "--valid", MULTI_TEST, "--num-round", "200",
                         "--early-stopping-rounds", "3", "--model-out", str(model))
    assert code == 0, err
    history: dict = {}
    train, valid = read_csv(MULTI_TRAIN), read_csv(MULTI_TEST)
    dtrain = train.to_dataset()
    ref = hb.train({"objective": "multi:softprob", "num_class": 5, "eta": 0.5, "nthread": 1,
                    "eval_metric": ["merror", "mlogloss"]}, dtrain, num_boost_round=200,
                   evals=[(dtrain, "train"), (valid.to_dataset(reference=dtrain), "valid")],
                   early_stopping_rounds=3, evals_result=history, verbose_eval=False)
    booster = hb.Booster(model_file=model)
    best = int(np.argmin(history["valid"]["mlogloss"]))
    assert booster.best_iteration == ref.best_iteration == best
    assert f"best iteration {best}" in err
    assert out.count("valid-mlogloss") == len(history["valid"]["mlogloss"])
    preds = tmp_path / "p.tsv"
    assert run(capsys, "predict", str(model), MULTI_TEST, "--label-column", "0",
               "--out", str(preds))[0] == 0
    got = np.loadtxt(preds)
    assert got.shape == (500, 5)
    np.testing.assert_array_equal(got, ref.predict(valid.X))


def test_libsvm_and_weight_column(tmp_path, capsys):
    model = tmp_path / "rank.json"
    assert run(capsys, "train", RANK, "--param", "nthread=1", "--num-round", "3", "--quiet",
               "--model-out", str(model)) == (0, "", "")
    data = read_libsvm(RANK)
    ref = hb.train({"nthread": 1}, data.to_dataset(), num_boost_round=3)
    # a test file that uses fewer features still gets the model's width
    small = tmp_path / "small.svm"
    small.write_text("1 1:0.5 3:0.25\n0 2:0.75\n")
    preds = tmp_path / "p.txt"
    assert run(capsys, "predict", str(model), str(small), "--out", str(preds))[0] == 0
    want = ref.predict(read_libsvm(small, n_features=data.X.shape[1]).X)
    np.testing.assert_array_equal(np.loadtxt(preds), want)

    # CSV with a header, the label and a weight column given by name
    rng = np.random.default_rng(0)
    M = np.column_stack([rng.integers(0, 2, 300), rng.uniform(0.5, 2, 300),
                         rng.normal(size=(300, 3))])
    csv = tmp_path / "w.csv"
    np.savetxt(csv, M, delimiter=",", header="y,w,a,b,c", comments="", fmt="%.17g")
    assert run(capsys, "train", str(csv), "--label-column", "y", "--weight-column", "w",
               "--param", "objective=binary:logistic", "nthread=1", "--num-round", "4",
               "--model-out", str(model))[0] == 0
    ref = hb.train({"objective": "binary:logistic", "nthread": 1},
                   hb.Dataset(M[:, 2:], label=M[:, 0], weight=M[:, 1]), num_boost_round=4,
                   verbose_eval=False)
    booster = hb.Booster(model_file=model)
    assert booster.feature_names == ["a", "b", "c"]
    np.testing.assert_array_equal(booster.predict(M[:, 2:]), ref.predict(M[:, 2:]))


def test_dump(tmp_path, capsys):
    data = read_csv(HIGGS_TEST)
    booster = hb.train({"max_depth": 2, "nthread": 1}, data.to_dataset(), num_boost_round=3)
    model = tmp_path / "m.json"
    booster.save_model(model)
    code, out, _ = run(capsys, "dump", str(model))
    assert code == 0 and out.count("booster[") == 3
    assert out.split("booster[1]:\n")[1].split("booster[2]")[0].strip() == \
        booster.get_dump()[1].strip()
    code, out, _ = run(capsys, "dump", str(model), "--with-stats", "--out",
                       str(tmp_path / "d.txt"))
    assert code == 0 and out == ""
    assert "gain=" in (tmp_path / "d.txt").read_text()


@pytest.mark.parametrize("argv, message", [
    (["train", "missing.csv", "--model-out", "m.json"], "data file 'missing.csv' does not exist"),
    (["train", HIGGS_TRAIN, "--param", "reg_lambda=-1", "--model-out", "m.json"],
     "reg_lambda must be >= 0"),
    (["train", HIGGS_TRAIN, "--model-out", "no/such/dir/m.json"], "output folder"),
    (["train", RANK, "--label-column", "3", "--model-out", "m.json"],
     "does not apply to a libsvm file"),
    (["train", "bad.csv", "--model-out", "m.json"], "bad.csv:3: column 1 value 'x'"),
    (["predict", "bad.csv", HIGGS_TEST, "--out", "p.txt"], "not a histboost JSON model"),
    (["predict", "missing.json", HIGGS_TEST, "--out", "p.txt"], "does not exist"),
])
def test_user_errors_exit_2_without_traceback(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.csv").write_text("1,2\n0,3\n1,x\n")
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(f"histboost {argv[0]}: error: ")
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "m.json").exists()


def test_failed_predict_leaves_existing_output(tmp_path, capsys):
    booster = hb.train({"nthread": 1}, read_csv(HIGGS_TEST).to_dataset(), num_boost_round=1)
    model = tmp_path / "m.json"
    booster.save_model(model)
    out = tmp_path / "p.txt"
    out.write_text("previous\n")
    code, _, err = run(capsys, "predict", str(model), HIGGS_TEST, "--out", str(out))
    assert code == 2 and "pass --label-column" in err
    assert out.read_text() == "previous\n"


def test_argument_errors_and_module_entry_point(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", HIGGS_TRAIN])  # --model-out is required
    assert exc.value.code == 2 and "--model-out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["train", HIGGS_TRAIN, "--param", "depth", "--model-out", "m.json"])
    assert exc.value.code == 2 and "expected key=value" in capsys.readouterr().err
    assert main([]) == 2
    root = Path(hb.__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "histboost", "--version"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"histboost {hb.__version__}"


# -- issue 18 ------------------------------------------------------------------------------------

def _csv(path, names, M):
    header = ",".join(names) + "\n" if names else ""
    path.write_text(header + "".join(",".join(repr(float(v)) for v in row) + "\n" for row in M))
    return str(path)


@pytest.fixture(scope="module")
def named_model(tmp_path_factory):
    """A model trained by the CLI on columns label,a,b,c, with its training matrix."""
    tmp = tmp_path_factory.mktemp("named")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    y = 2 * X[:, 0] - X[:, 1] + 0.5 * X[:, 2]
    data = _csv(tmp / "good.csv", ["label", "a", "b", "c"], np.column_stack([y, X]))
    model = str(tmp / "model.json")
    assert main(["train", data, "--label-column", "label", "--num-round", "5", "--quiet",
                 "--param", "max_depth=3", "nthread=1", "--model-out", model]) == 0
    return model, X, y, tmp


def test_predict_matches_header_columns_by_name(named_model, tmp_path, capsys):
    model, X, y, _ = named_model
    want = hb.Booster(model_file=model).predict(X)  # the columns in training order
    reordered = _csv(tmp_path / "r.csv", ["label", "c", "b", "a"],
                     np.column_stack([y, X[:, 2], X[:, 1], X[:, 0]]))
    out = tmp_path / "p.txt"
    code, _, err = run(capsys, "predict", model, reordered, "--label-column", "label",
                       "--out", str(out))
    assert code == 0, err
    np.testing.assert_array_equal(np.loadtxt(out), want)
    # the label may sit anywhere, and a file without a header is taken by position
    moved = _csv(tmp_path / "m.csv", ["b", "a", "label", "c"],
                 np.column_stack([X[:, 1], X[:, 0], y, X[:, 2]]))
    plain = _csv(tmp_path / "n.csv", None, X)
    for path, label in ((moved, ["--label-column", "label"]), (plain, [])):
        code, _, err = run(capsys, "predict", model, path, *label, "--out", str(out))
        assert code == 0, err
        np.testing.assert_array_equal(np.loadtxt(out), want)


@pytest.mark.parametrize("names,label,message", [
    (["label", "a", "b", "d"], "label", r"missing \['c'\], not in the model \['d'\]"),
    (["label", "a", "a", "b"], "label", r"header names \['a'\] more than once"),
    (["w", "a", "b", "c", "label"], "label", r"not in the model \['w'\].*--label-column"),
])
def test_predict_with_different_header_names_fails(named_model, tmp_path, capsys, names,
                                                   label, message):
    model, X, y, _ = named_model
    M = np.column_stack([y, X, y])[:, :len(names)]
    path = _csv(tmp_path / "x.csv", names, M)
    out = tmp_path / "p.txt"
    code, _, err = run(capsys, "predict", model, path, "--label-column", label,
                       "--out", str(out))
    assert code == 2 and re.search(message, err), err
    assert not out.exists()


def test_valid_file_columns_matched_by_name(named_model, tmp_path, capsys):
    model, X, y, tmp = named_model
    valid = _csv(tmp_path / "v.csv", ["c", "label", "a", "b"],
                 np.column_stack([X[:, 2], y, X[:, 0], X[:, 1]]))
    m2 = tmp_path / "m2.json"
    code, out, err = run(capsys, "train", str(tmp / "good.csv"), "--label-column", "label",
                         "--valid", valid, "--num-round", "5", "--param", "max_depth=3",
                         "nthread=1", "--model-out", str(m2))
    assert code == 0, err
    trees = [json.loads(hb.Booster(model_file=m).save_raw())["trees"] for m in (model, m2)]
    assert trees[0] == trees[1]  # the validation file does not change the model
    rmse = float(np.sqrt(np.mean((hb.Booster(model_file=model).predict(X) - y) ** 2)))
    assert f"valid-rmse:{rmse:.5f}" in out.splitlines()[-1]


@pytest.mark.parametrize("index", [3_000_000_000, 10**15])
def test_huge_feature_index_is_a_one_line_error(tmp_path, capsys, index):
    # a column index of 3e9 (10**15): more features than trees can name, and per-column
    # state (cut points, names, histogram slots) beyond any machine; a clear error up front,
    # not a MemoryError
    path = tmp_path / "huge.svm"
    path.write_text(f"1 {index}:1\n0 1:2\n")
    code, _, err = run(capsys, "train", str(path), "--model-out", str(tmp_path / "m.json"))
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(
        f"histboost train: error: data has {index:,} columns; histboost takes at most "
        "2,147,483,647"), err
    assert "Traceback" not in err and not (tmp_path / "m.json").exists()


def test_resource_errors_exit_2(tmp_path, capsys, monkeypatch):
    import histboost.cli as cli

    for exc in (MemoryError(), RecursionError("maximum recursion depth exceeded")):
        def boom(*args, exc=exc, **kwargs):
            raise exc
        monkeypatch.setattr(cli, "load_data", boom)
        code, _, err = run(capsys, "train", HIGGS_TRAIN, "--model-out", str(tmp_path / "m"))
        assert code == 2 and err.count("histboost train: error: ") == 1, err
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run(capsys, "dump", str(deep))
    assert code == 2 and "nested too deeply" in err and "Traceback" not in err
