"""Classic `ray.rllib.examples.env.parametric_actions_cartpole`: `ParametricActionsCartPole`, with
gymnasium's API.

CartPole with `max_avail_actions` actions of which two, at random places redrawn every step,
are the real LEFT and RIGHT; the observation says which (a Dict of `action_mask`, the
`avail_actions` embeddings, zero for the invalid ones, and the `cart` observation), and a
model that masks its logits with `action_mask` acts only with them. Classic RLlib's module was a
classic-gym env stepping `gym.make("CartPole-v0")` inside; after the one rewrite that inner env
is gymnasium's, which the classic calls cannot step (its `reset` returns `(obs, info)`), so tfrl
ships the helper on gymnasium's API throughout. An invalid action raises ValueError, as classic.
"""
from __future__ import annotations

import random
from typing import Optional

import gymnasium as gym
import numpy as np


class ParametricActionsCartPole(gym.Env):
    """CartPole with two valid actions hidden among `max_avail_actions` (module docstring)."""

    def __init__(self, max_avail_actions: int):
        # random 2-unit embeddings of LEFT and RIGHT, fixed for the env's life
        self.left_action_embed = np.random.randn(2)
        self.right_action_embed = np.random.randn(2)
        self.action_space = gym.spaces.Discrete(max_avail_actions)
        self.wrapped = gym.make("CartPole-v0")
        self.observation_space = gym.spaces.Dict({
            "action_mask": gym.spaces.Box(0, 1, shape=(max_avail_actions,)),
            "avail_actions": gym.spaces.Box(-10, 10, shape=(max_avail_actions, 2)),
            "cart": self.wrapped.observation_space,
        })
        self._rng = random.Random()

    def update_avail_actions(self) -> None:
        n = self.action_space.n
        self.action_assignments = np.zeros((n, 2), np.float32)
        self.action_mask = np.zeros(n, np.float32)
        self.left_idx, self.right_idx = self._rng.sample(range(n), 2)
        self.action_assignments[self.left_idx] = self.left_action_embed
        self.action_assignments[self.right_idx] = self.right_action_embed
        self.action_mask[[self.left_idx, self.right_idx]] = 1

    def _obs(self, cart) -> dict:
        return {"action_mask": self.action_mask.copy(),
                "avail_actions": self.action_assignments.copy(), "cart": cart}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:
            self._rng.seed(seed)
        cart, info = self.wrapped.reset(seed=seed, options=options)
        self.update_avail_actions()
        return self._obs(cart), info

    def step(self, action):
        """CartPole's step with the real action behind `action`.

        Raises:
          ValueError: `action` is none of the two valid ones.
        """
        if action == self.left_idx:
            actual_action = 0
        elif action == self.right_idx:
            actual_action = 1
        else:
            raise ValueError("Chosen action was not one of the non-zero action embeddings",
                             action, self.action_assignments, self.action_mask, self.left_idx,
                             self.right_idx)
        cart, reward, terminated, truncated, info = self.wrapped.step(actual_action)
        self.update_avail_actions()
        return self._obs(cart), reward, terminated, truncated, info


__all__ = ["ParametricActionsCartPole"]
