"""Classic `ray.rllib.tests.test_rollout_worker`'s helper envs, which classic example modules
import (examples/env/multi_agent.py): MockEnv and MockEnv2, on gymnasium's API."""
import gymnasium as gym


class MockEnv(gym.Env):
    """Observation 0 (Discrete(1)), reward 1 a step, terminated after `episode_length` steps."""

    def __init__(self, episode_length, config=None):
        self.episode_length = episode_length
        self.config = config
        self.i = 0
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.i = 0
        return 0, {}

    def step(self, action):
        self.i += 1
        return 0, 1.0, self.i >= self.episode_length, False, {}


class MockEnv2(gym.Env):
    """Observation = step count (Discrete(100)), reward 100 a step, terminated after
    `episode_length` steps."""

    def __init__(self, episode_length):
        self.episode_length = episode_length
        self.i = 0
        self.observation_space = gym.spaces.Discrete(100)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.i = 0
        return 0, {}

    def step(self, action):
        self.i += 1
        return self.i, 100.0, self.i >= self.episode_length, False, {}


__all__ = ["MockEnv", "MockEnv2"]
