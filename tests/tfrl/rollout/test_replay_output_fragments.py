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
        items = list(client.sample("fragments", num_samples=2, timeout=10))
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
