"""World size 1 (no engine, no torch) and argument checking."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import histboost.collective as hc

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(60)


def test_single_process_without_torch():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any import of torch now fails
        import numpy as np
        import histboost, histboost.collective as hc
        comm = hc.init()
        assert isinstance(comm, hc.SingleCommunicator) and comm.world_size == 1
        x = np.arange(6.0).reshape(3, 2)
        for alg in hc.ALGORITHMS["allreduce"]:
            y = comm.allreduce(x, algorithm=alg)
            assert y is not x and np.array_equal(y, x)
        assert np.array_equal(comm.reduce_scatter(x), x)
        assert np.array_equal(comm.allgather(x), x)
        assert np.array_equal(comm.allgather(2.5), [2.5])
        assert np.array_equal(comm.broadcast(x), x)
        assert np.array_equal(comm.reduce(x, op=max), x)
        assert comm.allreduce(x, inplace=True) is x
        comm.barrier()
        comm.close()
        try:
            import os
            os.environ.update(WORLD_SIZE="2", RANK="0")
            hc.init()
        except hc.CollectiveError as e:
            assert "torch" in str(e)
        else:
            raise AssertionError("expected CollectiveError")
        print("ok")
    """)
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60, cwd=str(REPO))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_init_world_size_one_is_single(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    comm = hc.init(timeout=5)
    assert isinstance(comm, hc.SingleCommunicator) and comm.timeout == 5


def test_argument_errors():
    comm = hc.SingleCommunicator()
    x = np.ones(3)
    with pytest.raises(ValueError, match="unknown allreduce algorithm"):
        comm.allreduce(x, algorithm="bruck")
    with pytest.raises(ValueError, match="unknown op"):
        comm.allreduce(x, op="prod")
    with pytest.raises(TypeError):
        comm.allreduce(x, op=3)
    with pytest.raises(ValueError, match="native"):
        comm.allreduce(x, op=lambda a, b: a, algorithm="native")
    with pytest.raises(ValueError, match="native reductions"):
        comm.allreduce(np.ones(2, np.uint16), algorithm="native")
    with pytest.raises(ValueError, match="root"):
        comm.broadcast(x, root=1)
    with pytest.raises(ValueError, match="at least one dimension"):
        comm.reduce_scatter(np.float64(1.0))
    with pytest.raises(ValueError, match="timeout"):
        comm.allreduce(x, timeout=0)
    with pytest.raises(ValueError, match="contiguous"):
        comm.allreduce(np.ones((4, 4))[:, 1], inplace=True)
    comm.close()
    with pytest.raises(hc.CollectiveError, match="closed"):
        comm.allreduce(x)


def test_torch_and_structured_inputs_keep_their_kind():
    torch = pytest.importorskip("torch")
    comm = hc.SingleCommunicator()
    t = torch.arange(4.0)
    out = comm.allreduce(t)
    assert isinstance(out, torch.Tensor) and torch.equal(out, t) and out is not t
    rec = np.zeros(3, [("gain", "f8"), ("feature", "i4")])
    assert comm.allreduce(rec, op=lambda a, b: a).dtype == rec.dtype


def test_check_metadata_takes_true_false_or_trust():
    comm = hc.init()
    x = np.arange(4.0)
    assert np.array_equal(comm.allreduce(x, check_metadata="trust"), x)
    with pytest.raises(ValueError, match="check_metadata must be True, False or 'trust'"):
        comm.allreduce(x, check_metadata="off")


def test_allreduce_tail_must_be_like_x():
    comm = hc.SingleCommunicator()
    x, counts = np.arange(4, dtype=np.int64), np.array([3, 4], np.int64)
    assert comm.allreduce(x, inplace=True, tail=counts) is x
    assert counts.tolist() == [3, 4]
    with pytest.raises(ValueError, match="tail must be like x"):
        comm.allreduce(x, inplace=True, tail=counts.astype(np.float64))
    with pytest.raises(ValueError, match="tail needs inplace=True"):
        comm.allreduce(x, tail=counts)
    with pytest.raises(ValueError, match="tail needs inplace=True"):
        comm.allreduce(x, op=max, inplace=True, tail=counts)
