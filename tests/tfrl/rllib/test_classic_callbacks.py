"""Classic callbacks: `on_train_result` of a DefaultCallbacks subclass (Ray 1.x) and Ray 0.8's
dict of functions taking one `info` dict (custom_metrics_and_callbacks_legacy.py's hooks)."""
import numpy as np
import pytest

from tfrl.errors import InvalidConfigError
from tfrl.rllib.agents.callbacks import DefaultCallbacks
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rollout.callbacks import make_callbacks

SMALL = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 64,
         "train_batch_size": 64, "model": {"fcnet_hiddens": [8]}}


class ResultCallbacks(DefaultCallbacks):
    def on_train_result(self, *, trainer, result, **kwargs):
        result["callback_ok"] = trainer.iteration


def test_on_train_result_may_add_to_the_result(ray_session):
    with PGTrainer(config=dict(SMALL, callbacks=ResultCallbacks)) as trainer:
        assert trainer.train()["callback_ok"] == 1
        assert trainer.train()["callback_ok"] == 2


def on_episode_start(info):
    info["episode"].user_data["pole_angles"] = []


def on_episode_step(info):
    episode = info["episode"]
    assert np.array_equal(episode.last_observation_for(), episode.last_raw_obs_for())
    episode.user_data["pole_angles"].append(abs(episode.last_observation_for()[2]))


def on_episode_end(info):
    episode = info["episode"]
    episode.custom_metrics["pole_angle"] = float(np.mean(episode.user_data["pole_angles"]))
    episode.custom_metrics["steps_seen"] = len(episode.user_data["pole_angles"])
    episode.custom_metrics["length"] = episode.length


def on_postprocess_traj(info):
    _, pre_batch = info["pre_batch"]  # classic: (policy, batch)
    assert info["post_batch"].count == pre_batch.count


def on_train_result(info):
    info["result"]["callback_ok"] = info["trainer"].iteration


def test_the_classic_dict_of_callback_functions(ray_session):
    callbacks = {"on_episode_start": on_episode_start, "on_episode_step": on_episode_step,
                 "on_episode_end": on_episode_end, "on_postprocess_traj": on_postprocess_traj,
                 "on_train_result": on_train_result}
    config = dict(SMALL, callbacks=callbacks, rollout_fragment_length=200,
                  train_batch_size=200, batch_mode="complete_episodes")
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
    assert result["callback_ok"] == 1
    metrics = result["custom_metrics"]
    assert 0.0 <= metrics["pole_angle_mean"] < 0.25  # radians: CartPole ends beyond 0.21
    # every step but the last one calls on_episode_step
    assert metrics["steps_seen_mean"] == pytest.approx(metrics["length_mean"] - 1)


def test_unknown_classic_callback_names_are_refused():
    with pytest.raises(InvalidConfigError, match="on_episode_ended"):
        make_callbacks({"on_episode_ended": print})


def test_an_env_registered_with_ray_tunes_register_env(ray_session):
    """Classic scripts register envs with ray.tune.registry.register_env."""
    import gymnasium as gym
    from ray.tune.registry import register_env

    register_env("classic_tune_cartpole", lambda _config: gym.make("CartPole-v1"))
    with PGTrainer(config=dict(SMALL, env="classic_tune_cartpole")) as trainer:
        assert trainer.train()["timesteps_total"] == 64
