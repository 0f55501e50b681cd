"""2 and 3 Gloo processes give the outputs and tables of 1 process; checkpoints re-shard."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from histboost.embedding import load_checkpoint, load_inference

WORKER = Path(__file__).with_name("_dist_worker.py")
TIMEOUT_S = 150


def _worker_module():
    spec = importlib.util.spec_from_file_location("_dist_worker", WORKER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(world: int, workdir: Path, reshard_from: Path | None = None) -> None:
    port = _free_port()
    extra = ["--reshard-from", str(reshard_from)] if reshard_from else []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), str(r), str(world), str(port),
                          str(workdir), *extra], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
        for r in range(world)
    ]
    deadline = time.monotonic() + TIMEOUT_S
    logs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            logs.append(out)
    except subprocess.TimeoutExpired:
        pytest.fail(f"world {world}: workers did not finish within {TIMEOUT_S}s")
    finally:
        for p in procs:  # never leave a rank behind, whatever happened
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = [p.returncode for p in procs]
    assert codes == [0] * world, "\n".join(f"--- rank {r} ---\n{log}"
                                           for r, log in enumerate(logs))


def test_two_and_three_processes_equal_one(tmp_path):
    w2, w3 = tmp_path / "w2", tmp_path / "w3"
    _launch(2, w2)
    _launch(3, w3, reshard_from=w2)  # also loads the 2-rank checkpoints onto 3 ranks

    # 3 ranks -> 1 process: the merged checkpoint equals the single-process reference.
    wk = _worker_module()
    for mode, combiner in wk.SCENARIOS:
        data, gs = wk.batches(mode, wk.STEPS + 1), wk.grads(wk.STEPS + 1)
        ref = wk.make_module(combiner=combiner)
        _, ref_opt = wk.train(ref, data[: wk.STEPS], gs[: wk.STEPS])
        single = wk.make_module(combiner=combiner)
        opt = wk.SparseAdam(single, lr=1.0)
        load_checkpoint(single, w3 / f"ckpt-{mode}-{combiner}", opt)
        keys = ref.keys()
        assert single.num_embeddings == ref.num_embeddings
        torch.testing.assert_close(single.embeddings(keys), ref.embeddings(keys), **wk.TOL)
        last_ref, _ = wk.train(ref, data[wk.STEPS:], gs[wk.STEPS:], opt=ref_opt)
        wk.train(single, data[wk.STEPS:], gs[wk.STEPS:], opt=opt, reference_out=last_ref)

        served = load_inference(w3 / f"ckpt-{mode}-{combiner}")
        assert not served.training and served.state_names() == []
        before = served.num_embeddings
        ro, k = data[0]
        out = served(ro, torch.cat([k[:-1], torch.tensor([123456789])]) if k.numel() else k,
                     wk.SLOTS)
        assert served.num_embeddings == before and out.shape == (wk.BATCH, wk.SLOTS, wk.DIM)


class _OneRank:
    """A communicator of world size 1 (the identity collectives)."""

    rank, world_size = 0, 1

    def reduce_scatter(self, x, op="sum"):
        assert op == "sum"
        return x.clone()

    def allgather(self, x):
        return x.clone()

    def barrier(self):
        pass


@pytest.mark.parametrize("mode", ["distributed_slot", "localized_slot"])
def test_world_of_one_equals_single_module(mode):
    from histboost.embedding import DistributedHashEmbeddingBag

    wk = _worker_module()
    for combiner in ("sum", "mean"):
        data, gs = wk.batches(mode, 2), wk.grads(2)
        ref = wk.make_module(combiner=combiner)
        ref_outs, _ = wk.train(ref, data, gs)
        dmod = wk.make_module(_OneRank(), mode, combiner)
        assert isinstance(dmod, DistributedHashEmbeddingBag)
        wk.train(dmod, data, gs, reference_out=ref_outs)
        keys = ref.keys()
        torch.testing.assert_close(dmod.local.embeddings(keys), ref.embeddings(keys), **wk.TOL)
