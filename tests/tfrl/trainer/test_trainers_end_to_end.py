"""Every algorithm trains through the full path: Ray rollout workers, the embedded replay server,
ReplayDataset and the learner, and returns RLlib's classic result dict."""
import numpy as np
import pytest

from tfrl.registry import get_trainer_class

RESULT_KEYS = {"episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
               "episodes_this_iter", "timesteps_total", "timesteps_this_iter", "time_this_iter_s",
               "time_total_s", "training_iteration", "num_healthy_workers", "custom_metrics", "info",
               "config", "done"}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("algo", ["PG", "A2C", "A3C", "PPO", "DQN"])
def test_two_iterations_return_the_classic_result_dict(ray_session, small_config, algo):
    trainer = get_trainer_class(algo)(config=small_config(algo), env="CartPole-v1")
    try:
        before = [w.copy() for w in trainer.get_policy().get_weights()]
        first = trainer.train()
        second = trainer.train()
        after = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    assert RESULT_KEYS <= set(second)
    assert (first["training_iteration"], second["training_iteration"]) == (1, 2)
    assert 0 < first["timesteps_total"] < second["timesteps_total"]
    assert second["info"]["num_steps_sampled"] == second["timesteps_total"]
    assert second["info"]["num_steps_trained"] > 0
    assert second["num_healthy_workers"] == 1
    assert second["done"] is False
    assert second["config"]["train_batch_size"] == trainer.config["train_batch_size"]
    assert second["config"] is not trainer.config  # a copy: editing it leaves the trainer alone
    assert second["info"]["learner"]["default_policy"], "no learner stats reported"
    assert any(not np.allclose(b, a) for b, a in zip(before, after)), "the policy did not learn"
    if second["episodes_this_iter"]:
        assert 8 <= second["episode_reward_mean"] <= 500  # CartPole returns
