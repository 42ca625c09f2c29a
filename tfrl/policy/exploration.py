"""Exploration objects built from a policy's `exploration_config` (classic RLlib's
`Policy._create_exploration`).

tfrl's own algorithms explore inside their policies (DQN's epsilon-greedy and DDPG's noise
mixins, SAC's random timesteps); these objects serve policies written against the classic API,
hand-coded ones above all, that ask `Policy._create_exploration()` for one. Types: the classic
default "StochasticSampling" (actions sampled from the policy's distribution: nothing to add),
"Random" (uniform actions from the action space) and "EpsilonGreedy" (epsilon from
tfrl/utils/schedules.py's `epsilon_schedule_from_config`), or an `Exploration` subclass.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from tfrl.errors import InvalidConfigError
from tfrl.utils.schedules import epsilon_schedule_from_config

DEFAULT_EXPLORATION_CONFIG = {"type": "StochasticSampling"}


class Exploration:
    """Base: holds what classic RLlib gives an Exploration (action space, policy config,
    model, worker index and count, framework)."""

    def __init__(self, action_space, *, policy_config: Dict, model: Any = None,
                 num_workers: int = 0, worker_index: int = 0, framework: str = "tf"):
        self.action_space = action_space
        self.policy_config = policy_config
        self.model = model
        self.num_workers = num_workers
        self.worker_index = worker_index
        self.framework = framework

    def get_exploration_action(self, actions, timestep: int = 0, explore: bool = True):
        """The actions to take given the policy's own `actions` (a batch); default: unchanged."""
        return actions

    def get_info(self) -> Dict:
        """Exploration state for metrics (classic `get_exploration_info`)."""
        return {}


class StochasticSampling(Exploration):
    """Classic default: the policy samples from its action distribution; nothing added."""


class Random(Exploration):
    """Uniformly random actions from the action space while exploring."""

    def get_exploration_action(self, actions, timestep: int = 0, explore: bool = True):
        if not explore:
            return actions
        return np.stack([self.action_space.sample() for _ in range(len(actions))])


class EpsilonGreedy(Exploration):
    """With probability epsilon(timestep) a uniformly random action, else the policy's."""

    def __init__(self, action_space, *, initial_epsilon: float = 1.0,
                 final_epsilon: float = 0.05, epsilon_timesteps: int = int(1e5), **kwargs):
        super().__init__(action_space, **kwargs)
        self.epsilon_schedule = epsilon_schedule_from_config(
            {"initial_epsilon": initial_epsilon, "final_epsilon": final_epsilon,
             "epsilon_timesteps": epsilon_timesteps})
        self.last_timestep = 0

    def get_exploration_action(self, actions, timestep: int = 0, explore: bool = True):
        self.last_timestep = int(timestep)
        if not explore:
            return actions
        actions = np.array(actions, copy=True)
        epsilon = self.epsilon_schedule.value(self.last_timestep)
        for i in np.flatnonzero(np.random.random(len(actions)) < epsilon):
            actions[i] = self.action_space.sample()
        return actions

    def get_info(self) -> Dict:
        return {"cur_epsilon": float(self.epsilon_schedule.value(self.last_timestep))}


EXPLORATION_TYPES = {cls.__name__: cls for cls in (StochasticSampling, Random, EpsilonGreedy)}


def exploration_from_config(exploration_config: Optional[Dict], action_space, *,
                            policy_config: Dict, model: Any = None, num_workers: int = 0,
                            worker_index: int = 0, framework: str = "tf") -> Exploration:
    """The Exploration `exploration_config` asks for ({"type": name or class, **kwargs};
    None: StochasticSampling; no type: EpsilonGreedy given DQN's epsilon keys, else
    StochasticSampling).

    Raises:
        InvalidConfigError: an unknown type, a type that is no Exploration subclass, keys the
            type does not take, or bad values (e.g. epsilons outside [0, 1]).
    """
    config = dict(exploration_config or DEFAULT_EXPLORATION_CONFIG)
    if "type" not in config:
        # tfrl's own algorithm configs name no type: DQN's epsilon keys mean EpsilonGreedy;
        # others (SAC's random_timesteps) are that algorithm's business, sampling here
        config = config if "initial_epsilon" in config else {}
        config["type"] = "EpsilonGreedy" if config else "StochasticSampling"
    kind = config.pop("type")
    cls = EXPLORATION_TYPES.get(kind) if isinstance(kind, str) else kind
    if not (isinstance(cls, type) and issubclass(cls, Exploration)):
        raise InvalidConfigError(
            f"exploration_config type must be one of {sorted(EXPLORATION_TYPES)} or an "
            f"Exploration subclass, got {kind!r}")
    try:
        return cls(action_space, policy_config=policy_config, model=model,
                   num_workers=num_workers, worker_index=worker_index, framework=framework,
                   **config)
    except TypeError as exc:
        raise InvalidConfigError(
            f"exploration_config {exploration_config!r} does not fit {cls.__name__}: {exc}") from exc
