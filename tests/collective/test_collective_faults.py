"""Fault tests over Gloo on loopback and over shared memory: a rank that dies, a rank that
never calls, ranks that disagree. Each must end with a clear error on the others within the
timeout, and leave no process (the harness asserts that after the launch) and no file in
/dev/shm behind. All cases share one launch of 3 ranks (see _coll_scenarios.faults)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _coll_harness import describe, run_group  # noqa: E402

pytestmark = pytest.mark.timeout(150)
TIMEOUT = 2.0


@pytest.fixture(scope="module")
def outcome():
    results = run_group(3, "faults", deadline_s=90, extra_env={"HB_TEST_TIMEOUT": str(TIMEOUT)})
    assert results[2].returncode == 3, describe(results)  # the rank that "crashed"
    for x in results[:2]:
        assert x.returncode == 0 and x.result and "crash" not in x.result, describe(results)
    return [x.result for x in results[:2]]


def test_mismatched_arguments_raise_on_every_rank(outcome):
    for res in outcome:
        m = res["mismatch"]
        for case in ("shape", "dtype", "rs_shape", "op", "root", "out_of_step", "trusted_size",
                     "trusted_call"):
            assert m[case]["error"] == "MetadataMismatchError", (case, m[case])
            assert m[case]["elapsed"] < 5.0
        assert "shape" in m["shape"]["message"]
        assert "(5,)" in m["shape"]["message"] and "(4,)" in m["shape"]["message"]
        assert "float32" in m["dtype"]["message"] and "float64" in m["dtype"]["message"]
        assert "reducer" in m["op"]["message"]
        assert "root" in m["root"]["message"]
        assert "out of step" in m["out_of_step"]["message"]
        # check_metadata="trust" over shared memory: the step's own size check
        assert "40 bytes" in m["trusted_size"]["message"], m["trusted_size"]
        assert "32 bytes" in m["trusted_size"]["message"], m["trusted_size"]
        assert "disagree" in m["trusted_call"]["message"], m["trusted_call"]
        assert m["still_usable"]


def test_groups_ran_over_their_transport(outcome):
    for res in outcome:
        assert res["transports"] == {
            "mismatch": "shm", "never_algorithms": "gloo", "never_algorithms_shm": "shm",
            "never_native": "gloo", "exit_early": "gloo", "exit_early_shm": "shm",
            "exit_early_shared": "shm"}


@pytest.mark.parametrize("case", ["never_algorithms", "never_algorithms_shm", "never_native"])
def test_rank_that_never_calls_times_out(outcome, case):
    for res in outcome:
        r = res[case]
        assert r["error"] == "CollectiveTimeout", r
        assert TIMEOUT * 0.9 <= r["elapsed"] < TIMEOUT + 3.0, r
        msg = r["message"]
        assert "timed out" in msg and "allreduce" in msg and "rank" in msg
        if case != "never_native":  # our transports name the peer they waited on
            assert r["peer"] in (0, 1, 2) and f"rank {r['peer']}" in msg


@pytest.mark.parametrize("case", ["exit_early", "exit_early_shm", "exit_early_shared"])
def test_rank_that_exits_early_fails_fast(outcome, case):
    for res in outcome:
        r = res[case]
        assert r["is_collective_error"], r
        assert r["elapsed"] < 10.0, r
        assert "allreduce" in r["message"] and "rank" in r["message"]
        # the communicator refuses to go on out of step
        assert r["after"]["is_collective_error"] and "unusable" in r["after"]["message"]
    if case == "exit_early_shm":
        # rank 0 waits on the dead rank 2, whose lock went with its process; rank 1 waits on
        # rank 0, which closes its transport as it fails
        for res in outcome:
            assert res[case]["elapsed"] < 3.0, res[case]
            assert "exited or closed" in res[case]["message"], res[case]
        assert [res[case]["peer"] for res in outcome] == [2, 0]
    if case == "exit_early_shared":
        # both wait at the step's barrier for the dead rank 2 itself
        for res in outcome:
            assert res[case]["elapsed"] < 3.0, res[case]
            assert "exited or closed" in res[case]["message"], res[case]
            assert res[case]["peer"] == 2, res[case]


def test_no_shared_memory_file_is_left(outcome):
    for res in outcome:
        assert res["shm_left"] == [] and res["shm_created_left"] == []
    setup = outcome[0]["setup_after_exit"]
    assert setup["error"] is not None, setup  # the dead rank cannot take part
    assert setup["files"] == [], setup  # rank 0 removed the region it had created


# -- check_metadata=False with different sizes (issue 18: 10) -----------------------------------

@pytest.fixture(scope="module")
def unchecked():
    results = run_group(3, "unchecked", deadline_s=90)
    # before the size check a rank died with SIGABRT inside Gloo (return code -6)
    assert all(x.returncode == 0 and x.result and "crash" not in x.result for x in results), \
        describe(results)
    return [x.result for x in results]


@pytest.mark.parametrize("case,sizes", [
    ("allreduce_ring", ["32 bytes on ranks 0, 2", "40 bytes on rank 1"]),
    ("allreduce_recursive_doubling", ["32 bytes on ranks 0, 2", "40 bytes on rank 1"]),
    ("allreduce_native", ["32 bytes on ranks 0, 2", "40 bytes on rank 1"]),
    ("allreduce_auto", ["32 bytes on ranks 0, 2", "40 bytes on rank 1"]),
    ("reduce_scatter_rows", ["64 bytes in 4 rows on rank 0", "64 bytes in 2 rows on ranks 1, 2"]),
    ("allgather", ["16 bytes on ranks 0, 1", "24 bytes on rank 2"]),
    ("broadcast", ["48 bytes on rank 0", "56 bytes on ranks 1, 2"]),
    ("reduce_dtype", ["32 bytes on ranks 0, 1", "16 bytes on rank 2"]),
])
def test_unchecked_size_mismatch_raises_on_every_rank(unchecked, case, sizes):
    for res in unchecked:
        r = res[case]
        assert r["error"] == "MetadataMismatchError", r
        assert "data size" in r["message"] and "check_metadata=False" in r["message"], r
        for s in sizes:
            assert s in r["message"], r
        assert r["elapsed"] < 5.0


def test_unchecked_and_checked_ranks_disagree_clearly(unchecked):
    for rank, res in enumerate(unchecked):
        r = res["mixed_settings"]
        assert r["error"] == "MetadataMismatchError", r
        # rank 0 switched the check off (only sizes), ranks 1 and 2 kept it
        assert ("sent no histboost metadata" if rank else "did not send a size check") \
            in r["message"], r
    assert all(res["still_usable"] for res in unchecked)
