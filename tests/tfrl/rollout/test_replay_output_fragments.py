"""Trajectory-fragment items (ReplayOutputSpec.item_length, IMPALA's data path) against a real
replay server: one item per env per fragment, and a clear error for rows that do not split into
whole fragments."""
import numpy as np
import pytest
from rollout_test_policies import PGPolicy

from replay.server import Server
from replay.table import Table
from tfrl.errors import InvalidBatchError
from tfrl.policy import SampleBatch
from tfrl.rollout import ReplayOutputSpec, RolloutWorker, fragment_signature, replay_signature

pytestmark = pytest.mark.timeout(120)

COLUMNS = ["obs", "actions", "new_obs", "terminateds", "truncateds"]


def test_each_env_fragment_is_one_item_and_bad_rows_are_refused(free_port):
    config = {"rollout_fragment_length": 6, "num_envs_per_worker": 2}
    probe = RolloutWorker("CartPole-v1", PGPolicy, config)
    signature = fragment_signature(replay_signature(probe.get_policy(), COLUMNS), 6)
    server = Server([Table.queue("fragments", 100, signature=signature)], port=free_port)
    try:
        spec = ReplayOutputSpec(f"127.0.0.1:{server.port}", "fragments", columns=COLUMNS,
                                item_length=6)
        worker = RolloutWorker("CartPole-v1", PGPolicy, config, replay_output=spec)
        summary = worker.sample()
        assert summary["env_steps"] == 12 and summary["items_written"] == {"default_policy": 2}
        client = server.localhost_client()
        items = list(client.sample("fragments", num_samples=2, timeout=10,
                                   emit_timesteps=False, unpack_as_table_signature=True))
        for item in items:
            obs, new_obs = item.data["obs"], item.data["new_obs"]
            assert obs.shape == (6, 4)
            ended = item.data["terminateds"] | item.data["truncateds"]
            np.testing.assert_array_equal(obs[1:][~ended[:-1]], new_obs[:-1][~ended[:-1]])
        # the two envs' fragments, not two halves of interleaved rows
        assert not np.array_equal(items[0].data["obs"][0], items[1].data["obs"][0])

        output = worker.replay_output
        batch = worker.runner.sample()
        short = SampleBatch({k: v[:-1] for k, v in batch.items()})  # one env has 5 rows
        with pytest.raises(InvalidBatchError, match="not a multiple of item_length=6"):
            output.write(short)
        no_env = SampleBatch({k: v for k, v in batch.items() if k != SampleBatch.ENV_ID})
        with pytest.raises(InvalidBatchError, match="env_id"):
            output.write(no_env)
        # the writer recovers and the table is untouched by the refused writes
        assert output.write(batch) == {"default_policy": 2}
        assert server.localhost_client().server_info()["fragments"].current_size == 2
    finally:
        server.stop()


def test_repeated_next_obs_are_stored_as_zeros_and_restored_exactly(free_port):
    """drop_repeated_next_obs: new_obs rows that the fragment's next obs already holds are
    written as zeros; restore_next_obs rebuilds every new_obs row the env produced, episode ends
    and fragment ends included."""
    import tensorflow as tf

    from tfrl.rollout.replay_output import restore_next_obs

    config = {"rollout_fragment_length": 6, "num_envs_per_worker": 2}
    probe = RolloutWorker("CartPole-v1", PGPolicy, config)
    signature = fragment_signature(replay_signature(probe.get_policy(), COLUMNS), 6)
    server = Server([Table.queue("fragments", 1000, signature=signature)], port=free_port)
    try:
        spec = ReplayOutputSpec(f"127.0.0.1:{server.port}", "fragments", columns=COLUMNS,
                                item_length=6, drop_repeated_next_obs=True)
        worker = RolloutWorker("CartPole-v1", PGPolicy, config, replay_output=spec)
        output = worker.replay_output
        expected = []  # the true (obs, new_obs, ended) of every fragment, in write order
        for _ in range(40):
            batch = worker.runner.sample()
            output.write(batch)
            order = np.argsort(batch[SampleBatch.ENV_ID], kind="stable")
            ended = (batch["terminateds"] | batch["truncateds"])[order]
            for start in range(0, len(order), 6):
                rows = order[start:start + 6]
                expected.append((batch["obs"][rows], batch["new_obs"][rows], ended[start:start + 6]))
            if sum(e[2][:-1].any() for e in expected) >= 2:
                break
        assert sum(e[2][:-1].any() for e in expected) >= 2, "no episode ended inside a fragment"
        client = server.localhost_client()
        items = list(client.sample("fragments", num_samples=len(expected), timeout=10,
                                   emit_timesteps=False, unpack_as_table_signature=True))
        for item, (obs, new_obs, ended) in zip(items, expected):
            np.testing.assert_array_equal(item.data["obs"], obs)
            stored = item.data["new_obs"]
            kept = ended.copy()
            kept[-1] = True  # a fragment's last next obs is not in the fragment
            np.testing.assert_array_equal(stored[kept], new_obs[kept])
            assert not stored[~kept].any(), "a repeated next obs was stored"
            data = {k: tf.constant(v) for k, v in item.data.items()}
            np.testing.assert_array_equal(restore_next_obs(data, 6)["new_obs"].numpy(), new_obs)

        # a new_obs that is not the next obs inside an episode cannot be dropped
        batch = worker.runner.sample()
        tampered = SampleBatch(dict(batch))
        tampered["new_obs"] = batch["new_obs"] + 1.0
        with pytest.raises(InvalidBatchError, match="differs from the next step's obs"):
            output.write(tampered)
    finally:
        server.stop()
