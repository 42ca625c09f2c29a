"""Rollouts written straight into a real replay server on loopback: one step item per row,
fixed columns and dtypes from the policy's signature, priorities, and only counts returned."""
import time

import numpy as np
import pytest
from rollout_test_policies import PGPolicy, PrioritizedPGPolicy

from replay.server import Server
from replay.table import Table
from tfrl.rollout import ReplayOutputSpec, RolloutWorker, replay_columns, replay_signature
from tfrl.errors import InvalidBatchError

pytestmark = pytest.mark.timeout(120)


def make_server(signature, port, name="steps"):
    """A queue table: each item is sampled once, in insertion order."""
    return Server([Table.queue(name, 10_000, signature=signature)], port=port)


def test_signature_is_derived_from_the_policy_and_column_list():
    policy = RolloutWorker("CartPole-v1", PGPolicy, {}).get_policy()
    columns = replay_columns(policy)
    assert columns[:6] == ("obs", "actions", "rewards", "new_obs", "terminateds", "truncateds")
    assert {"action_logp", "vf_preds", "advantages", "value_targets"} <= set(columns)
    signature = replay_signature(policy)
    assert list(signature) == list(columns)
    assert signature["obs"].shape == (4,) and signature["obs"].dtype == np.float32
    assert signature["actions"].shape == () and signature["actions"].dtype == np.int64
    assert signature["terminateds"].dtype == np.bool_
    assert signature["action_dist_inputs"].shape == (2,)
    narrow = replay_signature(policy, ["obs", "advantages"])
    assert list(narrow) == ["obs", "advantages"]
    with pytest.raises(InvalidBatchError, match="td_error"):
        replay_signature(policy, ["obs", "td_error"])


def test_worker_writes_each_step_as_one_item_and_returns_only_counts(free_port):
    config = {"rollout_fragment_length": 25, "num_envs_per_worker": 2}
    probe = RolloutWorker("CartPole-v1", PGPolicy, config)
    signature = replay_signature(probe.get_policy())
    server = make_server(signature, free_port)
    try:
        spec = ReplayOutputSpec(f"127.0.0.1:{server.port}", "steps")
        worker = RolloutWorker("CartPole-v1", PGPolicy, config, replay_output=spec)
        summary = worker.sample()
        assert summary["env_steps"] == 50 and summary["items_written"] == {"default_policy": 50}
        assert isinstance(summary["episodes"], list)
        client = server.localhost_client()
        samples = list(client.sample("steps", num_samples=50, timeout=10,
                                     emit_timesteps=False, unpack_as_table_signature=True))
        assert len(samples) == 50
        for s in samples:
            assert set(s.data) == set(signature)
            assert s.data["obs"].shape == (4,) and s.data["obs"].dtype == np.float32
            assert s.data["actions"].shape == () and s.data["terminateds"].dtype == np.bool_
            assert s.info.priority == 1.0
        obs = np.stack([s.data["obs"] for s in samples])
        new_obs = np.stack([s.data["new_obs"] for s in samples])
        # FIFO order is write order: within an env's fragment each next obs is the next row's obs
        cont = ~np.array([s.data["terminateds"] or s.data["truncateds"] for s in samples[:24]])
        np.testing.assert_array_equal(obs[1:25][cont], new_obs[:24][cont])
        worker.stop()
    finally:
        server.stop()


def test_priority_column_sets_item_priorities(free_port):
    probe = RolloutWorker("CartPole-v1", PrioritizedPGPolicy, {})
    signature = replay_signature(probe.get_policy(), ["obs", "actions", "advantages"])
    server = make_server(signature, free_port)
    try:
        spec = ReplayOutputSpec(f"127.0.0.1:{server.port}", "steps",
                                columns=["obs", "actions", "advantages"])
        worker = RolloutWorker("CartPole-v1", PrioritizedPGPolicy,
                               {"rollout_fragment_length": 10}, replay_output=spec)
        worker.sample()
        samples = list(server.localhost_client().sample("steps", num_samples=10, timeout=10,
                                                        emit_timesteps=False, unpack_as_table_signature=True))
        for s in samples:
            assert s.info.priority == pytest.approx(abs(float(s.data["advantages"])) + 0.5,
                                                    rel=1e-6)
        worker.stop()
    finally:
        server.stop()


def test_write_behind_returns_while_the_server_holds_inserts_and_loses_nothing(free_port):
    config = {"rollout_fragment_length": 25}
    probe = RolloutWorker("CartPole-v1", PGPolicy, config)
    signature = replay_signature(probe.get_policy())
    # A queue of 30 takes the first fragment and 5 steps of the second, then holds the inserts.
    server = Server([Table.queue("steps", 30, signature=signature)], port=free_port)
    try:
        spec = ReplayOutputSpec(f"127.0.0.1:{server.port}", "steps", flush_timeout=20,
                                max_unacked_after_write=25)
        worker = RolloutWorker("CartPole-v1", PGPolicy, config, replay_output=spec)
        first, second = worker.sample(), worker.sample()  # would time out waiting for every ack
        assert first["env_steps"] == second["env_steps"] == 25
        client = server.localhost_client()
        # the write returned with up to 25 items unacknowledged: the server may still be
        # inserting the 5 that fit
        deadline = time.monotonic() + 10
        while client.server_info()["steps"].current_size < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.server_info()["steps"].current_size == 30
        samples = list(client.sample("steps", num_samples=50, timeout=10,
                                     emit_timesteps=False, unpack_as_table_signature=True))
        worker.stop()  # the writer's close waits for the last acks
        obs = np.stack([s.data["obs"] for s in samples])
        new_obs = np.stack([s.data["new_obs"] for s in samples])
        cont = ~np.array([s.data["terminateds"] or s.data["truncateds"] for s in samples[:49]])
        np.testing.assert_array_equal(obs[1:][cont], new_obs[:-1][cont])  # all 50, in order
        assert client.server_info()["steps"].current_size == 0
    finally:
        server.stop()


def test_writes_rotate_over_replay_shards():
    config = {"rollout_fragment_length": 10, "num_envs_per_worker": 1}
    probe = RolloutWorker("CartPole-v1", PGPolicy, config)
    signature = replay_signature(probe.get_policy())
    servers = [make_server(signature, None), make_server(signature, None)]
    try:
        spec = ReplayOutputSpec([f"127.0.0.1:{s.port}" for s in servers], "steps")
        worker = RolloutWorker("CartPole-v1", PGPolicy, config, replay_output=spec)
        for _ in range(4):
            assert worker.sample()["items_written"] == {"default_policy": 10}
        worker.stop()
        # each fragment went whole to one shard, the next one to the other
        sizes = [s.localhost_client().server_info()["steps"].current_size for s in servers]
        assert sizes == [20, 20]
    finally:
        for server in servers:
            server.stop()
