"""Ape-X losing the node of a replay shard on a real multi-node Ray: the shard comes back on
another node from its checkpoint, and writers and the learner use it again. The cluster runs in
a subprocess (tests/tfrl/cluster/shard_loss_scenario.py); this test checks what it recorded."""
import json

import pytest

from tests.tfrl.cluster.scenario_process import run_scenario


@pytest.mark.timeout(480)
def test_a_replay_shard_lost_with_its_node_is_restarted_elsewhere_from_its_checkpoint(tmp_path):
    out = tmp_path / "seen.json"
    run = run_scenario("tests.tfrl.cluster.shard_loss_scenario", out, timeout=420)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    seen = json.loads(out.read_text())
    log = run.stdout + run.stderr
    before, after = seen["before"], seen["after"]

    # one shard on each replay node, reached at the node's address (never loopback)
    assert len(set(before["shard_nodes"])) == 2 and set(before["shard_nodes"]) < set(before["replay_nodes"])
    assert all(a.rsplit(":", 1)[0] == before["ip"] for a in before["addresses"])

    # shard 1's node was lost: the shard came back on the spare node, shard 0 stayed
    assert after["failures"] == 1 and after["restarts"] == 1 and after["live"] == 2
    assert after["shard_nodes"][0] == before["shard_nodes"][0]
    assert after["shard_nodes"][1] == after["spare"]
    assert after["addresses"][0] == before["addresses"][0]
    # the new server holds the items of the shard's last checkpoint (item keys are random 63-bit
    # numbers: a fresh table could not hold them)
    assert after["saved_keys"] > 0 and after["restored_keys"] > 0
    # the worker writes to both shards (the new one included) and the learner trains from both
    assert all(sorted(a) == sorted(after["addresses"]) for a in after["worker_addresses"])
    assert after["priority_updates_grew"] and after["trained"] > before["trained"]
    assert "restarted on" in log
