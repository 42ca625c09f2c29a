"""Ape-X DDPG (APEX_DDPG): DDPG's policy under the AsyncReplayOptimizer, on Pendulum-v1 with real
Ray rollout workers writing into two real replay shard servers; per-worker noise scales,
worker-side priorities and the learner's priorities going back to both shards."""
import numpy as np
import pytest
import ray

from tfrl.agents.ddpg.apex_ddpg import APEX_DDPG_DEFAULT_CONFIG, ApexDDPGTrainer, validate_config
from tfrl.registry import get_trainer_class
from tfrl.config import merge_config
from tfrl.errors import InvalidConfigError
from tfrl.optimizers.async_replay_optimizer import REPLAY_TABLE
from tfrl.policy import SampleBatch

SMALL = {
    "num_workers": 2, "num_envs_per_worker": 1, "num_replay_shards": 2,
    "rollout_fragment_length": 16, "learning_starts": 64, "buffer_size": 5000,
    "train_batch_size": 16, "timesteps_per_iteration": 96, "min_iter_time_s": 0,
    "target_network_update_freq": 64, "max_weight_sync_delay": 2, "learner_steps_per_call": 2,
    "actor_hiddens": [16], "critic_hiddens": [16], "seed": 5,
    "exploration_config": {"random_timesteps": 0},
}


def test_apex_ddpg_is_registered_and_refuses_a_single_replay_address():
    assert get_trainer_class("APEX_DDPG") is ApexDDPGTrainer
    config = merge_config(APEX_DDPG_DEFAULT_CONFIG, {"replay_address": "127.0.0.1:9"})
    with pytest.raises(InvalidConfigError, match="APEX_DDPG: replay_address"):
        validate_config(config)


@pytest.mark.timeout(300)
def test_apex_ddpg_trains_on_pendulum_with_two_shards_and_routed_priorities(ray_session):
    trainer = ApexDDPGTrainer(env="Pendulum-v1", config=SMALL)
    try:
        optimizer = trainer.optimizer
        # before learning: workers with the learner's weights rate their own transitions
        optimizer.publish_weights(target=True)
        for worker in trainer.workers.remote_workers():
            optimizer.send_newest_weights(worker)
        for _ in range(4):  # 2 workers x 4 fragments of 16, each to the next shard
            trainer.workers.call_remote_workers("sample")
        for shard in range(2):
            items = {int(s.info.key): s for s in optimizer.shards.client(shard).sample(
                REPLAY_TABLE, num_samples=200, timeout=30, emit_timesteps=False, unpack_as_table_signature=True)}
            data = {k: np.stack([s.data[k] for s in items.values()])
                    for k in next(iter(items.values())).data}
            td = optimizer.policy.compute_td_error(
                data[SampleBatch.OBS], data[SampleBatch.ACTIONS], data[SampleBatch.REWARDS],
                data[SampleBatch.NEXT_OBS], data[SampleBatch.TERMINATEDS],
                **{SampleBatch.N_STEPS: data[SampleBatch.N_STEPS]})
            priorities = np.array([s.info.priority for s in items.values()])
            np.testing.assert_allclose(priorities, np.abs(td) + 1e-6, rtol=1e-4, atol=1e-5)
            assert priorities.std() > 1e-3
        initial = [w.copy() for w in trainer.get_policy().get_weights()]
        for _ in range(40):  # the learner thread's first call traces its step
            result = trainer.train()
            if result["info"]["num_train_steps"] >= 8:
                break
        info = result["info"]
        assert info["num_replay_shards"] == 2
        assert info["num_train_steps"] > 0 and info["num_steps_trained"] > 0
        assert any(not np.allclose(a, b)
                   for a, b in zip(initial, trainer.get_policy().get_weights()))
        stats = info["learner"]["default_policy"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        # the learner's |TD| + eps went back to both shards (sent from the priority sender's
        # thread: wait until what was queued has landed)
        assert optimizer.flush_priorities(timeout=30)
        assert all(n > 0 for n in optimizer.priority_updates_per_shard)
        for shard in range(2):
            client = optimizer.shards.client(shard)
            assert client.server_info()[REPLAY_TABLE].current_size > 0
            priorities = [s.info.priority for s in client.sample(REPLAY_TABLE, num_samples=50,
                                                                  timeout=30,
                                                                  emit_timesteps=False, unpack_as_table_signature=True)]
            # worker-side and learner priorities, not the uniform 1.0 of unrated items
            assert len({round(p, 6) for p in priorities}) > 5
        # each worker explores with its own constant noise scale 0.4 ** (1 + i / (N - 1) * 7)
        scales = ray.get([w.apply.remote(
            lambda worker: (worker.worker_index, float(worker.get_policy().noise_scale.numpy())))
            for w in trainer.workers.remote_workers()])
        for index, scale in scales:
            assert scale == pytest.approx(0.4 ** (1 + (index - 1) * 7), rel=1e-5)
        assert info["replay"]["chunks_inserted"] > 0
    finally:
        trainer.stop()
