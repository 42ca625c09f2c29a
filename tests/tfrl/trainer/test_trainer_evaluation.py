"""Evaluation workers (RLlib classic): a separate WorkerSet runs `evaluation_num_episodes` episodes
with the trained weights and filters every `evaluation_interval` iterations, with the
`evaluation_config` overrides; the metrics come back under result["evaluation"]."""
import numpy as np
import pytest

from tfrl.agents.pg.pg import PGTrainer
from tfrl.errors import InvalidConfigError


@pytest.mark.timeout(300)
def test_local_evaluation_worker_runs_every_interval_without_exploration(ray_session, small_config):
    config = dict(small_config("PG"), evaluation_interval=2, evaluation_num_episodes=3,
                  evaluation_config={"explore": False}, observation_filter="MeanStdFilter")
    trainer = PGTrainer(config=config, env="CartPole-v1")
    try:
        first = trainer.train()
        second = trainer.train()
        evaluation = trainer.evaluation_workers.local_worker()
        training = trainer.workers.local_worker()
        assert evaluation is not training
        assert evaluation.config["explore"] is False and training.config["explore"] is True
        for a, b in zip(evaluation.get_weights()["default_policy"],
                        training.get_weights()["default_policy"]):
            np.testing.assert_array_equal(a, b)
        evaluation_filter = evaluation.get_filters()["default_policy"].running_stat
        training_filter = training.get_filters()["default_policy"].running_stat
        third = trainer.train()
    finally:
        trainer.stop()
    assert "evaluation" not in first and "evaluation" not in third
    metrics = second["evaluation"]
    assert metrics["episodes_this_iter"] == 3
    assert 8 <= metrics["episode_reward_min"] <= metrics["episode_reward_mean"] <= 500
    assert metrics["episode_len_mean"] == metrics["episode_reward_mean"]  # CartPole: +1 a step
    assert len(metrics["hist_stats"]["episode_reward"]) == 3
    # the evaluation worker started from the driver's filter and added its own episodes'
    # observations
    assert evaluation_filter.count >= training_filter.count + 3 * 8


@pytest.mark.timeout(300)
def test_remote_evaluation_workers_get_weights_and_filters(ray_session, small_config):
    config = dict(small_config("PG"), evaluation_interval=1, evaluation_num_episodes=2,
                  evaluation_num_workers=1, observation_filter="MeanStdFilter",
                  evaluation_config={"explore": False})
    trainer = PGTrainer(config=config, env="CartPole-v1")
    try:
        result = trainer.train()
        driver_filter = trainer.workers.local_worker().get_filters()["default_policy"].running_stat
        remote = trainer.evaluation_workers.foreach_worker(
            lambda w: (w.get_weights()["default_policy"],
                       w.get_filters()["default_policy"].running_stat, w.config["explore"]),
            local_worker=False)
        driver_weights = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    assert len(remote) == 1
    weights, stat, explore = remote[0]
    for a, b in zip(weights, driver_weights):
        np.testing.assert_array_equal(a, b)
    assert explore is False
    # it started from the driver's filter and added the observations of its episodes
    assert stat.count >= driver_filter.count + 2 * 8
    assert result["evaluation"]["episodes_this_iter"] == 2
    assert np.isfinite(result["evaluation"]["episode_reward_mean"])


def test_bad_evaluation_settings_are_named_errors(ray_session, small_config):
    with pytest.raises(InvalidConfigError, match="evaluation_num_episodes"):
        PGTrainer(config=dict(small_config("PG"), evaluation_interval=1,
                              evaluation_num_episodes=0), env="CartPole-v1")
    with pytest.raises(InvalidConfigError, match="evaluation_config.explor"):
        PGTrainer(config=dict(small_config("PG"), evaluation_interval=1,
                              evaluation_config={"explor": False}), env="CartPole-v1")
    with pytest.raises(InvalidConfigError, match="custom_eval_function"):
        PGTrainer(config=dict(small_config("PG"), evaluation_interval=1,
                              custom_eval_function="my_eval"), env="CartPole-v1")


def classic_custom_eval(trainer, eval_workers):
    """custom_eval.py's function of classic RLlib: per-worker env changes, one episode per
    worker and sample() call, episodes collected and summarised with the classic helpers."""
    import ray

    from tfrl.rllib.evaluation.metrics import collect_episodes, summarize_episodes

    worker_1, worker_2 = eval_workers.remote_workers()
    worker_1.foreach_env.remote(lambda env: setattr(env, "tag", 4))
    worker_2.foreach_env.remote(lambda env: setattr(env, "tag", 7))
    for _ in range(3):
        ray.get([w.sample.remote() for w in eval_workers.remote_workers()])
    episodes, pending = collect_episodes(remote_workers=eval_workers.remote_workers(),
                                         timeout_seconds=99999)
    assert pending == []
    metrics = summarize_episodes(episodes)
    metrics["foo"] = 1
    metrics["tags"] = sorted(t for w in eval_workers.remote_workers()
                             for t in ray.get(w.foreach_env.remote(lambda env: env.tag)))
    return metrics


@pytest.mark.timeout(300)
def test_custom_eval_function_runs_the_evaluation_on_remote_workers(ray_session, small_config):
    config = dict(small_config("PG"), evaluation_interval=1, evaluation_num_workers=2,
                  custom_eval_function=classic_custom_eval,
                  # CartPole never fails within 5 steps
                  evaluation_config={"horizon": 5, "num_envs_per_worker": 1})
    trainer = PGTrainer(config=config, env="CartPole-v1")
    try:
        result = trainer.train()
        training_horizon = trainer.workers.local_worker().settings.horizon
    finally:
        trainer.stop()
    assert training_horizon is None  # evaluation_config's horizon is the evaluation's only
    evaluation = result["evaluation"]
    assert evaluation["foo"] == 1 and evaluation["tags"] == [4, 7]
    # 3 rounds of one whole episode per worker, each cut at the evaluation horizon
    assert evaluation["episodes_this_iter"] == 6
    assert evaluation["hist_stats"]["episode_lengths"] == [5] * 6


def test_custom_eval_function_must_return_metrics(ray_session, small_config):
    trainer = PGTrainer(config=dict(small_config("PG"), evaluation_interval=1,
                                    custom_eval_function=lambda trainer, workers: None),
                        env="CartPole-v1")
    try:
        with pytest.raises(InvalidConfigError, match="must return a non-empty dict"):
            trainer.train()
    finally:
        trainer.stop()
