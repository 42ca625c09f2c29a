"""Remote rollout workers of a policy that runs in numpy (tfrl/policy/numpy_policy.py, and
DQN's tfrl/agents/dqn/numpy_q_policy.py) through a trainer on real Ray: they never start
TensorFlow while they only sample, the trainer learns from their rows, their weights follow the
learner's, and asking one for more than sampling (gradients) builds its TensorFlow policy with
the same weights, giving the same gradients as the driver's."""
import sys

import numpy as np
import pytest
import ray

from tfrl.agents.a3c import A2CTrainer
from tfrl.agents.dqn import DQNTFPolicy
from tfrl.agents.dqn.dqn import DQNTrainer
from tfrl.agents.pg import PGTrainer
from tfrl.agents.ppo.ppo import PPOTrainer

pytestmark = pytest.mark.timeout(300)


def _remote_states(trainer):
    return trainer.workers.foreach_worker(
        lambda w: ("tensorflow" in sys.modules, repr(w.get_policy())), local_worker=False)


def _assert_remote_weights_are_the_learners(trainer):
    trainer.workers.sync_weights()
    local = trainer.get_policy().get_weights()
    for remote in trainer.workers.foreach_worker(lambda w: w.get_weights()["default_policy"],
                                                 local_worker=False):
        for a, b in zip(local, remote):
            np.testing.assert_array_equal(a, b)


def test_sampling_workers_run_without_tensorflow_and_follow_the_learners_weights(
        ray_session, small_config):
    trainer = PPOTrainer(config=dict(small_config("PPO"), num_workers=2), env="CartPole-v1")
    try:
        assert trainer.workers.remote_policies_in_numpy
        first = trainer.train()
        second = trainer.train()
        assert second["timesteps_total"] == 2 * first["timesteps_total"] > 0
        assert second["info"]["learner"]["default_policy"]["vf_loss"] > 0
        assert _remote_states(trainer) == [(False, "NumpyPolicy(PPOTFPolicy, numpy only)")] * 2
        _assert_remote_weights_are_the_learners(trainer)
    finally:
        trainer.stop()


def test_pg_workers_postprocess_without_importing_its_tensorflow_policy_module(
        ray_session, small_config):
    """PG's postprocessing function is what the workers load of PG (pg_postprocessing.py)."""
    trainer = PGTrainer(config=small_config("PG"), env="CartPole-v1")
    try:
        result = trainer.train()
        assert result["info"]["learner"]["default_policy"]["policy_loss"] != 0
        assert _remote_states(trainer) == [(False, "NumpyPolicy(PGTFPolicy, numpy only)")]
    finally:
        trainer.stop()


def test_a_worker_asked_for_gradients_builds_its_tensorflow_policy_with_the_same_weights(
        ray_session, small_config):
    trainer = A2CTrainer(config=dict(small_config("A2C"), num_workers=1), env="CartPole-v1")
    try:
        trainer.train()
        trainer.workers.sync_weights()
        local = trainer.workers.local_worker()
        samples = local.sample()
        remote = trainer.workers.remote_workers()[0]
        remote_grads, _ = ray.get(remote.compute_gradients.remote(samples))
        local_grads, _ = local.compute_gradients(samples)
        assert len(remote_grads) == len(local_grads)
        for a, b in zip(remote_grads, local_grads):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        assert _remote_states(trainer) == [
            (True, "NumpyPolicy(A3CTFPolicy, with its TensorFlow policy built)")]
        assert trainer.train()["timesteps_total"] > 0  # sampling goes on after it
    finally:
        trainer.stop()


@pytest.mark.parametrize("off", ["numpy_rollout_workers", "numpy_actions"])
def test_turned_off_the_remote_workers_build_the_tensorflow_policy(ray_session, small_config, off):
    config = dict(small_config("PPO"), num_workers=1, **{off: False})
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        assert not trainer.workers.remote_policies_in_numpy
        assert trainer.train()["timesteps_total"] > 0
        [(has_tf, policy)] = _remote_states(trainer)
        assert has_tf and "PPOTFPolicy object" in policy
    finally:
        trainer.stop()


def test_dqn_remote_workers_sample_without_tensorflow_and_follow_the_learner(
        ray_session, small_config):
    trainer = DQNTrainer(config=dict(small_config("DQN"), num_workers=1), env="CartPole-v1")
    try:
        assert trainer.workers.remote_policies_in_numpy
        first = trainer.train()
        second = trainer.train()
        assert second["timesteps_total"] > first["timesteps_total"] > 0
        assert second["info"]["num_steps_trained"] > 0
        assert _remote_states(trainer) == [(False, "NumpyQPolicy(DQNTFPolicy, numpy only)")]
        _assert_remote_weights_are_the_learners(trainer)
        assert type(trainer.workers.local_worker().get_policy()) is DQNTFPolicy
    finally:
        trainer.stop()
