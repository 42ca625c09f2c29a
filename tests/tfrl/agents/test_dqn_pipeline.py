"""DQN through the pipelined SyncReplayOptimizer: a real Ray rollout worker writing into the
embedded replay server, ReplayDataset, the mirrored learner, batched priority updates and
weight broadcasts every `broadcast_interval` rounds."""
import weakref

import numpy as np
import pytest

from tests.tfrl.agents.agent_helpers import stop_frees
from tfrl.agents.dqn import DQNTrainer
from tfrl.agents.dqn.dqn import DEFAULT_CONFIG, validate_config
from tfrl.errors import InvalidConfigError

SMALL = dict(num_workers=1, num_envs_per_worker=2, rollout_fragment_length=8, train_batch_size=16,
             learning_starts=32, buffer_size=2000, timesteps_per_iteration=64, hiddens=[16],
             model={"fcnet_hiddens": [16], "fcnet_activation": "relu"}, seed=5)


def weights_of_remote_worker(trainer):
    import ray

    worker = trainer.workers.remote_workers()[0]
    return ray.get(worker.get_weights.remote())["default_policy"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("prioritized", [True, False])
def test_pipelined_rounds_hold_the_replay_ratio_and_update_priorities(ray_session, prioritized):
    config = dict(SMALL, prioritized_replay=prioritized, training_intensity=4,
                  final_prioritized_replay_beta=1.0 if prioritized else 0.4,
                  prioritized_replay_beta_annealing_timesteps=1000)
    trainer = DQNTrainer(config=config, env="CartPole-v1")
    optimizer = trainer.optimizer
    try:
        before = [w.copy() for w in trainer.get_policy().get_weights()]
        sent = []
        if prioritized:
            original = optimizer._update_priorities

            def recording(outputs, *lane):
                sent.append(sum(len(o.info.key) for o in outputs))
                return original(outputs, *lane)

            optimizer._update_priorities = recording
        for _ in range(3):
            result = trainer.train()
        optimizer.drain()
        sampled, trained = optimizer.num_steps_sampled, optimizer.num_steps_trained
        beta = float(optimizer.beta.numpy())
    finally:
        trainer.stop()
    if prioritized:  # beta anneals linearly from 0.4 towards 1.0 over 1000 sampled steps
        assert 0.4 < beta <= 0.4 + 0.6 * min(sampled / 1000, 1)
    else:
        assert beta == pytest.approx(0.4)
    after = trainer.get_policy().get_weights()
    assert any(not np.allclose(b, a) for b, a in zip(before, after)), "the policy did not learn"
    # the driver trains exactly what the inserted steps paid for (intensity 4 rows per step)
    paid_batches = int((sampled - 32 + 1) * 4 // 16)
    assert trained == 16 * optimizer.num_train_steps
    # the last round's batches are owed only after its results are counted (drain)
    assert paid_batches - optimizer.num_train_steps <= (2 * 2 * 8 * 4) // 16
    assert optimizer.num_train_steps > 0
    assert result["info"]["learner"]["default_policy"]["mean_q"] != 0
    if prioritized:
        # one priority update per learner call, covering every sampled row of that call
        assert sent and sum(sent) == trained
    assert result["timesteps_total"] <= sampled


@pytest.mark.timeout(240)
@pytest.mark.parametrize("interval", [1, 1000])
def test_weights_reach_the_worker_only_every_broadcast_interval_rounds(ray_session, interval):
    config = dict(SMALL, broadcast_interval=interval, training_intensity=8)
    trainer = DQNTrainer(config=config, env="CartPole-v1")
    optimizer = trainer.optimizer
    try:
        initial = [w.copy() for w in weights_of_remote_worker(trainer)]
        for _ in range(12):
            optimizer.step()
        optimizer.drain()
        remote = weights_of_remote_worker(trainer)
        learner = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    assert optimizer.num_train_steps > 0
    assert any(not np.allclose(i, w) for i, w in zip(initial, learner)), "the learner did not learn"
    remote_moved = any(not np.allclose(i, r) for i, r in zip(initial, remote))
    # interval 1000: only the first round (before any training) broadcast weights
    assert remote_moved == (interval == 1)


@pytest.mark.parametrize("value", [0, -2])
def test_broadcast_interval_below_one_is_refused(value):
    config = dict(DEFAULT_CONFIG, broadcast_interval=value)
    with pytest.raises(InvalidConfigError, match="broadcast_interval"):
        validate_config(config)


@pytest.mark.timeout(240)
def test_learner_policy_starts_with_a_target_network_equal_to_its_online_network(ray_session):
    # The optimizer swaps the learner's own policy copy into the local worker and copies the
    # worker's online weights into it; its target network must follow, or the first targets
    # come from an unrelated random network.
    import tensorflow as tf

    from tfrl.policy import SampleBatch

    trainer = DQNTrainer(config=dict(SMALL, num_workers=0), env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        assert policy is trainer.optimizer.policy
        obs = tf.constant(np.random.default_rng(0).normal(size=(8, 4)), tf.float32)
        online, _ = policy.model({SampleBatch.OBS: obs})
        target, _ = policy.target_model({SampleBatch.OBS: obs})
        np.testing.assert_allclose(target.numpy(), online.numpy(), rtol=1e-5, atol=1e-6)
    finally:
        trainer.stop()


@pytest.mark.timeout(240)
def test_stop_frees_the_learner_iterator_without_a_garbage_collection(ray_session):
    """As Ape-X's (test_apex.py): a stopped DQN's tf.data iterator is freed by stop(), not by
    a later full collection that would wait in its destructor holding the GIL."""
    trainer = DQNTrainer(config=SMALL, env="CartPole-v1")
    try:
        trainer.train()
    except BaseException:
        trainer.stop()
        raise
    lane = next(iter(trainer.optimizer.lanes.values()))
    freed = stop_frees(trainer, weakref.ref(lane.iterator))
    assert freed
