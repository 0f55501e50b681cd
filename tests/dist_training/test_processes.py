"""`histboost train` under a torchrun-style launch (real processes, torch.distributed Gloo on
loopback, CPU arrays through shared memory unless a test says otherwise): the model equals the
one-process model, only rank 0 writes it, and a worker that dies or stalls ends the job on the
others with an error within the timeout, leaving no process behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import histboost as hb
from histboost.data import load_data

pytest.importorskip("torch.distributed")

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(900, 6)), 2)
    y = (X[:, 0] - X[:, 1] + rng.normal(size=900) > 0).astype(int)
    path = tmp_path_factory.mktemp("data") / "train.csv"
    np.savetxt(path, np.column_stack([y, X]), delimiter=",", fmt="%g")
    return path


def _command(data: Path, out: Path, rounds: int, timeout: float) -> list[str]:
    return [sys.executable, "-m", "histboost", "train", str(data), "--model-out", str(out),
            "--num-round", str(rounds), "--timeout", str(timeout), "--param",
            "objective=binary:logistic", "quantized_grad=true", "max_depth=4", "nthread=1",
            "eval_metric=logloss"]


def _launch(world: int, command: list[str], logs: Path, gpu: bool = False,
            extra_env: dict[str, str] | None = None) -> list[subprocess.Popen]:
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                   PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        if not gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        env.update(extra_env or {})
        log = open(logs / f"rank{rank}.log", "w")  # noqa: SIM115 (the process owns it)
        procs.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=str(REPO)))
        log.close()
    return procs


def _finish(procs: list[subprocess.Popen], deadline: float) -> list[int | None]:
    """Wait until `deadline` (monotonic); kill whatever is left; return the exit codes
    (None for a process that had to be killed)."""
    codes: list[int | None] = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            codes.append(None)
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    return codes


def _log(logs: Path, rank: int) -> str:
    return (logs / f"rank{rank}.log").read_text()


def test_cli_model_equals_one_process(tmp_path, data_file):
    out = tmp_path / "two.json"
    procs = _launch(2, _command(data_file, out, ROUNDS, 60), tmp_path)
    # meanwhile, the one-process model in this process (the CLI's parameters)
    table = np.loadtxt(data_file, delimiter=",")
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 4,
              "nthread": 1, "eval_metric": "logloss"}
    want = json.loads(hb.train(params, hb.Dataset(table[:, 1:], label=table[:, 0]), ROUNDS,
                               verbose_eval=False).save_raw())
    codes = _finish(procs, time.monotonic() + 120)
    assert codes == [0, 0], [_log(tmp_path, r) for r in range(2)]
    got = json.loads(out.read_text())
    assert got["trees"] == want["trees"] and got["learner"] == want["learner"]
    assert "on 2 processes" in _log(tmp_path, 0)
    assert "train-logloss" not in _log(tmp_path, 1)  # only rank 0 reports
    assert not list(tmp_path.glob("two.json.*")), "temporary files left behind"


def test_cli_rank_files(tmp_path, data_file):
    """DATA with {rank}: each process reads its own file; the cuts come from all files. Over
    Gloo's TCP (the other tests run over shared memory), where exact reductions take Gloo's
    native collectives."""
    table = np.loadtxt(data_file, delimiter=",")
    for r, part in enumerate(np.array_split(table, 2)):
        np.savetxt(tmp_path / f"part-{r}.csv", part, delimiter=",", fmt="%g")
    out = tmp_path / "model.json"
    procs = _launch(2, _command(tmp_path / "part-{rank}.csv", out, 3, 60), tmp_path,
                    extra_env={"HISTBOOST_COLLECTIVE_SHM": "0"})
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 4,
              "nthread": 1, "eval_metric": "logloss"}
    want = json.loads(hb.train(params, hb.Dataset(table[:, 1:], label=table[:, 0]), 3,
                               verbose_eval=False).save_raw())
    codes = _finish(procs, time.monotonic() + 120)
    assert codes == [0, 0], [_log(tmp_path, r) for r in range(2)]
    assert json.loads(out.read_text())["trees"] == want["trees"]


def test_cli_libsvm_model_equals_one_process(tmp_path):
    """A libsvm file (a sparse Dataset) split over 2 processes: the one-process model, with
    global cuts from the stored values of all ranks."""
    rng = np.random.default_rng(2)
    X = np.where(rng.random((500, 30)) < 0.15, np.round(rng.normal(size=(500, 30)), 1), 0.0)
    y = (X[:, 0] - X[:, 1] + rng.normal(size=500) * 0.3 > 0).astype(int)
    data = tmp_path / "train.svm"
    data.write_text("".join(f"{y[i]} " + " ".join(f"{j}:{X[i, j]:g}" for j in np.flatnonzero(
        X[i])) + "\n" for i in range(500)))
    out = tmp_path / "model.json"
    command = _command(data, out, 4, 60) + ["max_bin=16"]
    procs = _launch(2, command, tmp_path)
    params = {"objective": "binary:logistic", "quantized_grad": True, "max_depth": 4,
              "nthread": 1, "eval_metric": "logloss", "max_bin": 16}
    one = load_data(data)
    want = json.loads(hb.train(params, hb.Dataset(one.X, label=one.y), 4,
                               verbose_eval=False).save_raw())
    codes = _finish(procs, time.monotonic() + 120)
    assert codes == [0, 0], [_log(tmp_path, r) for r in range(2)]
    got = json.loads(out.read_text())
    assert got["trees"] == want["trees"] and got["learner"] == want["learner"]


@pytest.mark.parametrize("fault", ["killed", "stalled"])
def test_a_dead_or_stalled_worker_stops_the_job(tmp_path, data_file, fault):
    timeout = 6.0
    out = tmp_path / "model.json"
    procs = _launch(2, _command(data_file, out, 100_000, timeout), tmp_path)
    # wait until training runs (rank 0 prints a metric line per round)
    start = time.monotonic()
    while "[3]" not in _log(tmp_path, 0):
        assert time.monotonic() - start < 90, _log(tmp_path, 0) + _log(tmp_path, 1)
        assert procs[0].poll() is None, _log(tmp_path, 0)
        time.sleep(0.2)
    t0 = time.monotonic()
    if fault == "killed":
        os.killpg(procs[1].pid, signal.SIGKILL)
    else:
        os.killpg(procs[1].pid, signal.SIGSTOP)
    codes = _finish(procs[:1], t0 + timeout + 30)
    stopped_after = time.monotonic() - t0
    _finish(procs[1:], time.monotonic())  # the stalled rank is killed here
    log = _log(tmp_path, 0)
    assert codes == [1], log
    assert stopped_after < timeout + 20, stopped_after
    assert "histboost train: error:" in log and "rank" in log.lower(), log
    assert not out.exists(), "a model was written by a failed job"


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(not _cuda_available(), reason="no CUDA device")
@pytest.mark.parametrize("learner,quantised", [("data", True), ("reduce_scatter", True),
                                               ("data", False)])
def test_gpu_workers_give_the_one_process_model(tmp_path, data_file, learner, quantised):
    """Two processes on the GPU(s) (sharing one over Gloo when there is one): the quantised
    model equals the one-process CPU model; the float model (fixed point at the global
    gradient bounds) equals the one-GPU model."""
    out = tmp_path / "gpu.json"
    cmd = _command(data_file, out, ROUNDS, 120) + ["device=cuda", f"tree_learner={learner}"]
    if not quantised:
        cmd = [c for c in cmd if c != "quantized_grad=true"]
    procs = _launch(2, cmd, tmp_path, gpu=True)
    table = np.loadtxt(data_file, delimiter=",")
    params = {"objective": "binary:logistic", "quantized_grad": quantised, "max_depth": 4,
              "nthread": 1, "eval_metric": "logloss",
              "device": "cpu" if quantised else "cuda"}
    want = json.loads(hb.train(params, hb.Dataset(table[:, 1:], label=table[:, 0]), ROUNDS,
                               verbose_eval=False).save_raw())
    codes = _finish(procs, time.monotonic() + 300)
    assert codes == [0, 0], [_log(tmp_path, r) for r in range(2)]
    assert json.loads(out.read_text())["trees"] == want["trees"]
