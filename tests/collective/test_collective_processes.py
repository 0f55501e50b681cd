"""Multi-process tests: every collective, algorithm and reducer against a NumPy reference for
world sizes 1 to 9, in one 9-process launch (subgroups give the smaller sizes, run side by
side); groups of sizes 9, 7, 5, 3 and 2 move CPU arrays through the shared-memory transport
(rings of 8 slots of 2 KiB, so that larger messages go in pieces and fill the rings), sizes 8, 6
and 4 through Gloo on loopback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _coll_harness import describe, run_group  # noqa: E402
from _coll_scenarios import SHM_SIZES  # noqa: E402

pytestmark = pytest.mark.timeout(360)


@pytest.fixture(scope="module")
def batteries():
    results = run_group(9, "battery_all", deadline_s=300,
                        extra_env={"HISTBOOST_COLLECTIVE_SHM_RING_BYTES": str(16 << 10),
                                   "HISTBOOST_COLLECTIVE_SHM_STAGE_BYTES": "2048"})
    crashed = [x for x in results if x.returncode != 0 or not x.result or "crash" in x.result]
    assert not crashed, describe(crashed)
    return results


@pytest.mark.parametrize("world_size", range(1, 10))
def test_every_algorithm_matches_numpy(batteries, world_size):
    members = [x for x in batteries if str(world_size) in x.result]
    assert len(members) == world_size
    for x in members:
        res = x.result[str(world_size)]
        assert res["n_checks"] > 500
        assert res["n_failures"] == 0, f"rank {x.rank}: " + "\n".join(res["failures"])


@pytest.mark.parametrize("world_size", range(2, 10))
def test_results_are_bit_identical_across_ranks(batteries, world_size):
    runs = [x.result[str(world_size)] for x in batteries if str(world_size) in x.result]
    ref = runs[0]["hashes"]
    assert len(ref) > 300
    for res in runs[1:]:
        differ = sorted(k for k in ref if res["hashes"].get(k) != ref[k])
        assert not differ, f"ranks disagree on {differ[:10]}"


def test_groups_ran_over_their_transport_and_left_no_file(batteries):
    # (a group of one rank never needs shared memory)
    want = {str(k): "shm" if k in SHM_SIZES else "gloo" for k in range(1, 10)}
    for x in batteries:
        assert x.result["transports"] == {k: want[k] for k in x.result["transports"]}
        # native collectives are the faster choice for small calls over Gloo's TCP only
        assert x.result["prefers_native"] == {k: want[k] == "gloo"
                                              for k in x.result["transports"]}
        # the region of every group was unlinked once its ranks had attached
        assert x.result["shm_left"] == [] and x.result["shm_created_left"] == []
