"""Observation filters through a Trainer: the driver's MeanStdFilter follows the rollout workers'
(synchronised every iteration), survives save/restore, and is part of the exported SavedModel,
whose Box actions are clipped to the action space like `compute_action`'s."""
import time

import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.ppo.ppo import PPOTrainer


def _filter_stat(worker_filters):
    return worker_filters["default_policy"].running_stat


def _wait_until_dead(actor, attempts=100):
    import ray

    for _ in range(attempts):
        try:
            ray.get(actor.ping.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("the killed actor still answers")


@pytest.mark.timeout(300)
def test_mean_std_filter_is_synchronised_saved_and_served(ray_session, small_config, tmp_path):
    config = dict(small_config("PPO"), observation_filter="MeanStdFilter")
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        trainer.train()
        result = trainer.train()
        driver = _filter_stat(trainer.workers.local_worker().get_filters())
        remote = _filter_stat(trainer.workers.foreach_worker(
            lambda w: w.get_filters(), local_worker=False)[0])
        steps = result["timesteps_total"]
        # every env step pushes one observation, every reset one more (CartPole episodes here
        # last 10+ steps)
        assert steps <= driver.count <= 1.2 * steps + 8, (driver.count, steps)
        assert remote.count == driver.count
        np.testing.assert_allclose(remote.mean, driver.mean)
        assert np.all(driver.std > 0.01)

        # compute_action and the SavedModel both take raw observations through that filter
        export_dir = trainer.export_policy_model(str(tmp_path / "model"))
        raw = (np.random.default_rng(0).normal(size=(32, 4)) * 2).astype(np.float32)
        expected_actions = np.array([trainer.compute_action(o) for o in raw])
        filtered = np.stack([trainer.workers.local_worker().filter_observation(o) for o in raw])
        _, _, extras = trainer.get_policy().compute_actions(filtered, explore=False)
        expected_logits = extras["action_dist_inputs"]
        path = trainer.save(str(tmp_path / "checkpoints"))

        # a recreated worker starts from the driver's filter (plus its own first resets)
        import ray

        victim = trainer.workers.remote_workers()[0]
        ray.kill(victim, no_restart=True)
        _wait_until_dead(victim)  # ray.kill only asks: a ping sent at once may still be answered
        assert trainer.workers.probe_workers() == 1
        recreated = _filter_stat(trainer.workers.foreach_worker(
            lambda w: w.get_filters(), local_worker=False)[0])
        assert driver.count <= recreated.count <= driver.count + 2
    finally:
        trainer.stop()

    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        observations=tf.constant(raw))
    np.testing.assert_allclose(served["action_dist_inputs"].numpy(), expected_logits,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(served["deterministic_actions"].numpy(), expected_actions)

    restored = PPOTrainer(config=config, env="CartPole-v1")
    try:
        restored.restore(path)
        for worker_filters in restored.workers.foreach_worker(lambda w: w.get_filters()):
            stat = _filter_stat(worker_filters)
            assert stat.count == driver.count
            np.testing.assert_array_equal(stat.mean, driver.mean)
            np.testing.assert_array_equal(stat.m2, driver.m2)
        np.testing.assert_array_equal(
            np.array([restored.compute_action(o) for o in raw]), expected_actions)
    finally:
        restored.stop()


@pytest.mark.timeout(300)
def test_exported_pendulum_actions_are_clipped_like_compute_action(ray_session, small_config, tmp_path):
    config = dict(small_config("PPO"), observation_filter="MeanStdFilter", num_workers=1)
    trainer = PPOTrainer(config=config, env="Pendulum-v1")
    try:
        trainer.train()
        policy = trainer.get_policy()
        raw = (np.random.default_rng(1).uniform(-1, 1, size=(64, 3)) * [1, 1, 8]).astype(np.float32)
        filtered = np.stack([trainer.workers.local_worker().filter_observation(o) for o in raw])
        # A policy whose mean actions often leave the bounds [-2, 2], as a diverging run's do:
        # the mean is linear in the output layer's first column, so rescaling that column and
        # its bias stretches this batch's means over [-4, 4] whatever the training left.
        means, _, _ = policy.compute_actions(filtered, explore=False)
        scale = 8.0 / (means.max() - means.min())
        shift = -4.0 - scale * means.min()
        for variable in policy.model.variables:
            if variable.name.startswith("fc_out/"):
                values = variable.numpy()
                if variable.name.startswith("fc_out/kernel"):
                    values[:, 0] *= scale
                else:
                    values[0] = scale * values[0] + shift
                variable.assign(values)
        unclipped, _, _ = policy.compute_actions(filtered, explore=False)
        assert unclipped.max() > 2.0 and unclipped.min() < -2.0, "the test needs actions out of bounds"
        assert np.any(np.abs(unclipped) < 2.0), "and some inside them"
        expected = np.stack([trainer.compute_action(o) for o in raw])
        export_dir = trainer.export_policy_model(str(tmp_path / "model"))
    finally:
        trainer.stop()
    # One observation at a time against a batch, and the SavedModel's graph (its filter in
    # float32) against the policy's: the same float32 arithmetic in another order, whose rounding
    # the output column's stretch by `scale` magnifies. A missing clip or filter is off by far more.
    float32_sound = {"rtol": 1e-5, "atol": 1e-4}
    np.testing.assert_allclose(expected, np.clip(unclipped, -2.0, 2.0), **float32_sound)
    served = tf.saved_model.load(export_dir).signatures["serving_default"](
        observations=tf.constant(raw))
    deterministic = served["deterministic_actions"].numpy()
    sampled = served["actions"].numpy()
    np.testing.assert_allclose(deterministic, expected, **float32_sound)
    assert deterministic.dtype == np.float32
    for actions in (deterministic, sampled):
        assert actions.shape == (64, 1)
        assert actions.min() >= -2.0 and actions.max() <= 2.0
