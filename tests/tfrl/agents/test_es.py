"""ES and ARS: the shaping and update math on hand-computed cases, the aggregation tree against
flat aggregation, learning on CartPole, and the tuned examples (real Ray, real gymnasium)."""
from importlib import resources

import numpy as np
import pytest
import yaml

from tfrl.agents.es.fitness import (centered_rank_weights, compute_centered_ranks,
                                    top_directions_weights)
from tfrl.agents.es.noise_table import SharedNoiseTable
from tfrl.errors import InvalidBatchError, InvalidConfigError

TINY = {"num_workers": 2, "noise_size": 200_000, "episodes_per_batch": 8,
        "train_batch_size": 0, "perturbations_per_round": 2, "eval_prob": 1.0,
        "report_length": 1, "seed": 3, "model": {"fcnet_hiddens": [8]}, "stepsize": 0.05,
        "num_cpus_per_worker": 0}


def test_centered_ranks_map_the_order_of_all_returns_to_minus_half_to_half():
    ranks = compute_centered_ranks(np.array([[1.0, 4.0], [3.0, 2.0]]))
    np.testing.assert_allclose(ranks, [[-0.5, 0.5], [1 / 6, -1 / 6]], atol=1e-6)


def test_es_update_direction_equals_the_hand_computed_one():
    # pairs (r+, r-) = (1, 4) and (3, 2): centered ranks give weights -0.5 - 0.5 = -1 and
    # 1/6 + 1/6 = 1/3; perturbations e0 = [1, 0] (offset 0) and e1 = [0, 2] (offset 2)
    weights = centered_rank_weights(np.array([[1.0, 4.0], [3.0, 2.0]]))
    np.testing.assert_allclose(weights, [-1.0, 1 / 3], atol=1e-6)
    table = SharedNoiseTable(np.array([1.0, 0.0, 0.0, 2.0], np.float32))
    direction = table.weighted_sum(weights, np.array([0, 2]), dim=2)
    np.testing.assert_allclose(direction, [-1.0, 2 / 3], atol=1e-6)
    from tfrl.agents.es.es import ESTrainer

    # ES's ascent direction divides by the number of returns (2 per pair)
    np.testing.assert_allclose(ESTrainer.ascent_direction(None, direction, 2), [-0.25, 1 / 6],
                               atol=1e-6)


def test_ars_keeps_the_top_directions_and_divides_by_their_return_std():
    returns = np.array([[1.0, 0.0], [10.0, 6.0], [2.0, 5.0]])
    # top 2 by max(r+, r-): pairs 1 (10) and 2 (5); std of [10, 6, 2, 5]
    sigma = np.std([10.0, 6.0, 2.0, 5.0])
    np.testing.assert_allclose(top_directions_weights(returns, 2),
                               [0.0, 4.0 / sigma, -3.0 / sigma])


def test_shaping_refuses_returns_that_are_not_pairs():
    with pytest.raises(InvalidBatchError, match=r"shape \[N, 2\]"):
        centered_rank_weights(np.zeros((3, 3)))


def test_the_aggregation_tree_gives_the_flat_update_and_the_driver_one_vector(ray_session):
    from tfrl.agents.es.es import ESTrainer

    results, weights = {}, {}
    for aggregators in (0, 2):
        trainer = ESTrainer(env="CartPole-v1", config=dict(
            TINY, num_aggregators=aggregators, aggregation_fan_in=2))
        try:
            results[aggregators] = trainer.train()
            weights[aggregators] = trainer.get_policy().get_weights()
        finally:
            trainer.stop()
    flat, tree = results[0], results[2]
    assert flat["info"]["num_pairs"] == tree["info"]["num_pairs"] == 4
    assert flat["episode_reward_mean"] == tree["episode_reward_mean"]
    assert flat["timesteps_total"] == tree["timesteps_total"] > 0
    np.testing.assert_allclose(weights[0], weights[2], rtol=1e-5, atol=1e-7)
    # flat: every worker's offsets, returns and lengths each round; tree: one update vector
    num_params = weights[0].size
    assert tree["info"]["driver_bytes_received"] < num_params * 8 + 2500
    assert flat["info"]["driver_bytes_received"] > 0


def test_es_improves_cartpole_in_a_few_iterations(ray_session):
    from tfrl.agents.es.es import ESTrainer

    trainer = ESTrainer(env="CartPole-v1", config=dict(
        TINY, episodes_per_batch=40, perturbations_per_round=5, noise_stdev=0.05,
        num_aggregators=1, seed=1, model={"fcnet_hiddens": [16]}))
    try:
        means = [trainer.train()["episode_reward_mean"] for _ in range(4)]
    finally:
        trainer.stop()
    assert means[-1] > means[0] + 100, means


def test_ars_trains_and_refuses_a_bad_rollouts_used(ray_session):
    from tfrl.registry import get_trainer_class

    ars = get_trainer_class("ARS")
    with pytest.raises(InvalidConfigError, match="rollouts_used"):
        ars(env="CartPole-v1", config=dict(TINY, rollouts_used=0))
    trainer = ars(env="CartPole-v1", config=dict(TINY, rollouts_used=4, model={}))
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert result["info"]["num_pairs"] == 4 and result["timesteps_total"] > 0
        assert not np.allclose(before, trainer.get_policy().get_weights())
    finally:
        trainer.stop()


@pytest.mark.parametrize("name", ["cartpole-es", "cartpole-ars", "pendulum-es"])
def test_es_tuned_examples_load_and_validate(name):
    from tfrl.agents.es.es import validate_config
    from tfrl.registry import get_trainer_class
    from tfrl.config import merge_config

    text = resources.files("tfrl.tuned_examples").joinpath(f"{name}.yaml").read_text()
    (_, spec), = yaml.safe_load(text).items()
    trainer_cls = get_trainer_class(spec["run"])
    assert spec["run"] in ("ES", "ARS")
    config = merge_config(trainer_cls.default_config(), spec["config"])
    validate_config(config)
    assert spec["stop"]["episode_reward_mean"] >= (450 if "cartpole" in name else -300)


@pytest.mark.parametrize("example", ["ppo_es", "a3c_es"])
def test_nesting_examples_run_an_es_loop_over_unmodified_trainers(ray_session, example):
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", f"{example}.py")
    spec = importlib.util.spec_from_file_location(f"example_{example}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    history = module.main(["--population", "2", "--generations", "1", "--workers", "0"])
    assert len(history) == 1 and history[0] > 0


def _observations(env_name: str, count: int = 12) -> np.ndarray:
    """Real observations of `env_name` under random actions (seeded)."""
    import gymnasium as gym

    env = gym.make(env_name)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    seen = []
    while len(seen) < count:
        seen.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset(seed=len(seen))
    env.close()
    return np.asarray(seen, np.float32)


@pytest.mark.parametrize("run", ["ES", "ARS"])
def test_es_and_ars_restore_weights_optimizer_and_filter_from_a_checkpoint(
        ray_session, tmp_path, run):
    from tfrl.registry import get_trainer_class

    config = dict(TINY, observation_filter="MeanStdFilter")
    trainer_cls = get_trainer_class(run)
    trainer = trainer_cls(env="CartPole-v1", config=config)
    try:
        for _ in range(2):
            trainer.train()
        checkpoint = trainer.save(str(tmp_path))
        weights = trainer.get_policy().get_flat_weights()
        optimizer = trainer.es_optimizer.get_state()
        stat = trainer.observation_filter.running_stat
        observations = _observations("CartPole-v1")
        actions = [trainer.compute_action(obs) for obs in observations]
    finally:
        trainer.stop()
    assert stat.count > 0 and optimizer["t"] == 2

    restored = trainer_cls(env="CartPole-v1", config=config)
    try:
        assert not np.array_equal(restored.get_policy().get_flat_weights(), weights)
        restored.restore(checkpoint)
        np.testing.assert_array_equal(restored.get_policy().get_flat_weights(), weights)
        restored_optimizer = restored.es_optimizer.get_state()
        assert restored_optimizer.keys() == optimizer.keys()
        for key, value in optimizer.items():
            np.testing.assert_array_equal(restored_optimizer[key], value, err_msg=key)
        restored_stat = restored.observation_filter.running_stat
        assert restored_stat.count == stat.count
        np.testing.assert_array_equal(restored_stat.mean, stat.mean)
        np.testing.assert_array_equal(restored_stat.m2, stat.m2)
        assert [restored.compute_action(obs) for obs in observations] == actions
        assert restored.iteration == 2
        # the workers were handed the restored statistics and train on from them
        result = restored.train()
        assert result["timesteps_total"] > 0 and restored.iteration == 3
        assert restored.observation_filter.running_stat.count > stat.count
    finally:
        restored.stop()


@pytest.mark.parametrize("run,env_name", [("ES", "CartPole-v1"), ("ARS", "Pendulum-v1"),
                                          ("ES", "Pendulum-v1")])
def test_exported_es_policy_serves_the_actions_of_compute_action(
        ray_session, tmp_path, run, env_name):
    import tensorflow as tf

    from tfrl.registry import get_trainer_class

    trainer = get_trainer_class(run)(env=env_name, config=dict(
        TINY, observation_filter="MeanStdFilter"))
    try:
        trainer.train()
        policy = trainer.get_policy()
        # large weights: CartPole's actions then differ between observations, and Pendulum's
        # squashed outputs reach the bounds, where they must stay
        noise = np.random.default_rng(0).normal(scale=3.0, size=policy.num_params)
        policy.set_flat_weights(policy.get_flat_weights() + noise)
        observations = _observations(env_name, count=32)
        expected = np.array([trainer.compute_action(obs) for obs in observations])
        export_dir = trainer.export_policy_model(str(tmp_path / "model"))
    finally:
        trainer.stop()
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    out = serve(observations=tf.constant(observations))
    # the documented outputs: ES's policy is deterministic, so both are the same actions
    np.testing.assert_array_equal(out["actions"].numpy(), out["deterministic_actions"].numpy())
    served = out["actions"].numpy()
    if env_name == "CartPole-v1":
        assert served.shape == (len(observations),)
        np.testing.assert_array_equal(served, expected)
        assert len(set(expected.tolist())) == 2, "a policy with one action tests little"
    else:
        assert served.shape == expected.shape == (len(observations), 1)
        np.testing.assert_allclose(served, expected, rtol=1e-4, atol=1e-4)
        assert np.all(served >= -2.0) and np.all(served <= 2.0)
        assert np.all(expected >= -2.0) and np.all(expected <= 2.0)
        assert np.abs(served).max() > 1.9, "the check should reach the bounds"


def test_tfrl_export_and_rollout_read_an_es_checkpoint_without_workers(
        ray_session, tmp_path, capsys):
    # `tfrl export` / `tfrl rollout` rebuild the trainer with num_workers=0: ES then plays in
    # the driver, and the stored num_aggregators (the tree needs actors) is set aside
    import tensorflow as tf

    from tfrl.agents.es.es import ESTrainer
    from tfrl.cli import main
    from tfrl.trainer import Trainer

    trainer = ESTrainer(env="CartPole-v1", config=dict(TINY, num_aggregators=1))
    try:
        trainer.train()
        checkpoint = trainer.save(str(tmp_path / "checkpoints"))
        observations = _observations("CartPole-v1")
        expected = [trainer.compute_action(obs) for obs in observations]
    finally:
        trainer.stop()
    assert main(["export", checkpoint, str(tmp_path / "model")]) == 0
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures["serving_default"]
    served = serve(observations=tf.constant(observations))["actions"].numpy()
    np.testing.assert_array_equal(served, expected)
    assert main(["rollout", checkpoint, "--episodes", "2"]) == 0
    assert "mean return over 2 episodes" in capsys.readouterr().out

    local = Trainer.from_checkpoint(checkpoint, num_workers=0)
    try:
        before = local.get_policy().get_flat_weights()
        result = local.train()
    finally:
        local.stop()
    # the one in-driver worker: two rounds of 2 pairs, one evaluation episode after each
    assert result["info"]["num_pairs"] == 4 and result["episodes_this_iter"] == 10
    assert not np.array_equal(before, local.get_policy().get_flat_weights())
