"""Envs with classic gym's API (`reset()` without `seed` returning the observation(s), 4-value
`step` with `done`/`dones["__all__"]`), as classic RLlib's users wrote them: the env creator
wraps them once in an adapter with gymnasium's API, and the trainers train on them."""
import logging
import sys

import gymnasium as gym
import numpy as np
import pytest
import ray.cloudpickle

from tfrl import errors
from tfrl.env.classic_api import (ClassicEnvAdapter, ClassicMultiAgentEnvAdapter,
                                  adapt_classic_env)
from tfrl.env.registry import resolve_env_creator
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rllib.env.multi_agent_env import MultiAgentEnv

pytestmark = pytest.mark.timeout(300)

# the trainer's remote worker builds this module's envs: Ray ships them by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

MODEL = {"fcnet_hiddens": [8]}
OBS = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)


class ClassicCorridor(gym.Env):
    """Classic single-agent form (custom_env.py's SimpleCorridor): 3 steps an episode, reward 1
    for action 1; `config["time_limit"]` ends it as classic gym's TimeLimit did."""

    def __init__(self, config=None):
        config = config or {}
        self.observation_space = OBS
        self.action_space = ACT
        self.time_limit = config.get("time_limit", False)
        self.seeds = []

    def seed(self, seed=None):
        self.seeds.append(seed)
        return [seed]

    def reset(self):
        self.t = 0
        return np.eye(3, dtype=np.float32)[0]

    def step(self, action):
        self.t += 1
        done = self.t >= 3
        info = {"TimeLimit.truncated": True} if done and self.time_limit else {}
        return np.eye(3, dtype=np.float32)[self.t % 3], float(action == 1), done, info


class ClassicGame(MultiAgentEnv):
    """Classic multi-agent form (TwoStepGame's): one shared space pair, `reset()` -> obs dict,
    4 dicts from `step`. Agent "y" leaves after 2 steps, the episode ends after 3."""

    observation_space = OBS
    action_space = ACT

    def __init__(self, config=None):
        self.time_limit = (config or {}).get("time_limit", False)

    def reset(self):
        self.t = 0
        return {"x": OBS.low, "y": OBS.low}

    def step(self, action_dict):
        self.t += 1
        obs = {a: np.eye(3, dtype=np.float32)[self.t % 3] for a in action_dict}
        rewards = {a: float(action == 1) for a, action in action_dict.items()}
        dones = {"__all__": self.t >= 3}
        infos = {}
        if "y" in action_dict:
            dones["y"] = self.t >= 2
        dones["x"] = self.t >= 3
        if self.time_limit:
            infos = {a: {"TimeLimit.truncated": True} for a in action_dict if dones[a]}
        return obs, rewards, dones, infos


class ModernCorridor(ClassicCorridor):
    def reset(self, *, seed=None, options=None):
        return super().reset(), {}

    def step(self, action):
        obs, reward, done, info = super().step(action)
        return obs, reward, done, False, info


def make(env_cls, **config):
    return resolve_env_creator(env_cls)(config)


def test_a_modern_env_is_returned_as_it_is():
    env = ModernCorridor()
    assert adapt_classic_env(env, "modern") is env
    assert type(make(ModernCorridor)) is ModernCorridor
    assert type(make("CartPole-v1")).__name__ != "ClassicEnvAdapter"


def test_a_classic_env_gets_gymnasiums_api_and_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="tfrl.env.classic_api"):
        env = make(ClassicCorridor)
        make(ClassicCorridor)
    assert isinstance(env, ClassicEnvAdapter)
    assert env.observation_space == OBS and env.action_space == ACT
    warnings = [r for r in caplog.records if "ClassicCorridor" in r.getMessage()]
    assert len(warnings) <= 1  # once per class and process (an earlier test may have warned)
    obs, info = env.reset()
    assert obs.tolist() == [1.0, 0.0, 0.0] and info == {}
    assert env.step(1) == (pytest.approx(np.eye(3)[1]), 1.0, False, False, {})
    env.step(0)
    *_, terminated, truncated, _ = env.step(1)
    assert (terminated, truncated) == (True, False)
    assert env.time_limit is False  # other attributes come from the classic env


def test_a_time_limit_done_is_a_truncation():
    env = make(ClassicCorridor, time_limit=True)
    env.reset()
    env.step(1)
    env.step(1)
    _, _, terminated, truncated, info = env.step(1)
    assert (terminated, truncated) == (False, True) and info["TimeLimit.truncated"]


def test_a_seed_given_to_reset_goes_to_the_classic_seed_method():
    env = make(ClassicCorridor)
    env.reset(seed=7)
    env.reset()
    assert env.unwrapped_classic.seeds == [7]


def test_a_classic_multi_agent_env_gets_tfrls_five_dicts():
    env = make(ClassicGame)
    assert isinstance(env, ClassicMultiAgentEnvAdapter) and isinstance(env, MultiAgentEnv)
    assert env.get_observation_space("x") == OBS and env.get_action_space("y") == ACT
    obs, infos = env.reset()
    assert set(obs) == {"x", "y"} and infos == {}
    env.step({"x": 1, "y": 0})
    _, rewards, terminateds, truncateds, _ = env.step({"x": 1, "y": 1})
    assert rewards == {"x": 1.0, "y": 1.0}
    assert terminateds == {"x": False, "y": True, "__all__": False}
    assert truncateds == {"x": False, "y": False, "__all__": False}
    *_, terminateds, truncateds, _ = env.step({"x": 0})
    assert terminateds == {"x": True, "__all__": True}
    assert truncateds == {"x": False, "__all__": False}


def test_time_limit_dones_of_a_multi_agent_env_are_truncations():
    env = make(ClassicGame, time_limit=True)
    env.reset()
    env.step({"x": 1, "y": 0})
    *_, terminateds, truncateds, _ = env.step({"x": 1, "y": 1})
    assert terminateds["y"] is False and truncateds["y"] is True
    *_, terminateds, truncateds, _ = env.step({"x": 0})
    assert terminateds == {"x": False, "__all__": False}
    assert truncateds == {"x": True, "__all__": True}


class FiveValueClassicReset(ClassicCorridor):
    def step(self, action):
        return OBS.low, 0.0, False, False, {}


class NoAllDones(ClassicGame):
    def step(self, action_dict):
        obs, rewards, dones, infos = super().step(action_dict)
        del dones["__all__"]
        return obs, rewards, dones, infos


class ArrayReset(ClassicGame):
    def reset(self):
        return OBS.low


class WrapsGymnasiumEnvs(ClassicGame):
    """Classic outside, gymnasium inside (make_multiagent's MultiEnv over gymnasium.make)."""

    def reset(self):
        return {"x": (OBS.low, {}), "y": (OBS.low, {})}


class ReturnsObsAndInfo(ClassicCorridor):
    def reset(self):
        return super().reset(), {}


@pytest.mark.parametrize("env_cls, call, match", [
    (WrapsGymnasiumEnvs, lambda env: env.reset(), "observation of agent 'x' is an \\(obs, info\\) pair"),
    (ReturnsObsAndInfo, lambda env: env.reset(), "it returned an \\(obs, info\\) pair"),
    (FiveValueClassicReset, lambda env: env.reset() and env.step(0),
     "must return 4 values .* returned 5 values"),
    (NoAllDones, lambda env: env.reset() and env.step({"x": 0, "y": 0}),
     "dones dict with the key '__all__'"),
    (ArrayReset, lambda env: env.reset(), "must return a dict .* returned ndarray"),
])
def test_an_env_of_neither_api_is_a_named_error(env_cls, call, match):
    env = make(env_cls)
    with pytest.raises(errors.InvalidEnvError, match=match):
        call(env)


def test_a_classic_single_agent_env_trains_an_iteration(ray_session):
    config = {"env": ClassicCorridor, "env_config": {"time_limit": True}, "num_workers": 1,
              "rollout_fragment_length": 6, "train_batch_size": 12, "model": MODEL}
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
    assert result["timesteps_total"] >= 12
    assert result["episodes_total"] >= 4
    assert 0.0 <= result["episode_reward_mean"] <= 3.0
    assert result["episode_len_mean"] == 3


def by_agent(agent_id):
    return "px" if agent_id == "x" else "py"


def test_a_classic_multi_agent_env_trains_an_iteration(ray_session):
    config = {"env": ClassicGame, "num_workers": 1, "rollout_fragment_length": 6,
              "train_batch_size": 12, "model": MODEL,
              "multiagent": {"policies": {"px": (None, None, None, {}),
                                          "py": (None, None, None, {})},
                             "policy_mapping_fn": by_agent}}
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
    assert result["timesteps_total"] >= 12
    assert result["episodes_total"] >= 4
    assert set(result["policy_reward_mean"]) == {"px", "py"}
    assert 0.0 <= result["episode_reward_mean"] <= 5.0
