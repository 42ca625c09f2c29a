"""Classic `ray.rllib.examples.env.multi_agent`: `make_multiagent` and the multi-agent envs it
makes (`MultiAgentCartPole`, ...), with gymnasium's API over tfrl's `IndependentCopiesEnv`.

Classic RLlib's module was a classic-gym env (`reset()` -> obs dict, 4-dict `step`) that steps
`gym.make(...)` envs inside. After the one rewrite (`gym` -> `gymnasium`) that module would step
gymnasium envs with classic calls (their `reset` returns `(obs, info)`, their `step` 5 values),
which no adapter from outside can repair; so tfrl ships the helper itself, on gymnasium's API
throughout. Differences from classic: gymnasium ids (`Pendulum-v1`: gymnasium has no
`Pendulum-v0`); the test-only envs `EarlyDoneMultiAgent`, `RoundRobinMultiAgent` and
`MultiAgentStatelessCartPole` are not here.
"""
from __future__ import annotations

from typing import Any, Callable, Union

from tfrl.env.multi_agent_env import IndependentCopiesEnv
from tfrl.env.registry import EnvContext, ResolvedEnvCreator
from tfrl.rllib.tests.test_rollout_worker import MockEnv

NUM_AGENTS_KEY = "num_agents"


def _creator(env_name_or_creator: Union[str, Callable[[Any], Any]]) -> ResolvedEnvCreator:
    if isinstance(env_name_or_creator, str):
        # classic made the id with no arguments: the env_config is for the creator callables
        name = env_name_or_creator
        return ResolvedEnvCreator(name, lambda _config: _make_gymnasium(name))
    return ResolvedEnvCreator(getattr(env_name_or_creator, "__name__", "creator"),
                              env_name_or_creator)


def _make_gymnasium(env_id: str):
    import gymnasium

    return gymnasium.make(env_id)


def make_multiagent(env_name_or_creator: Union[str, Callable[[Any], Any]]) -> type:
    """A `MultiAgentEnv` class whose `__init__(config)` makes `config["num_agents"]` (default 1)
    independent copies of a gymnasium id or of `creator(config)`, agents 0..n-1 (classic
    `make_multiagent`). A creator's env with classic gym's API is adapted to gymnasium's.

    Raises (from the class's constructor):
      gymnasium.error.Error: the id is not a gymnasium env; else whatever the creator raises.
    """
    creator = _creator(env_name_or_creator)

    class MultiEnv(IndependentCopiesEnv):
        def __init__(self, config=None):
            config = config if config is not None else {}
            inner = EnvContext({k: v for k, v in config.items() if k != NUM_AGENTS_KEY},
                               worker_index=getattr(config, "worker_index", 0),
                               vector_index=getattr(config, "vector_index", 0),
                               num_workers=getattr(config, "num_workers", 0))
            super().__init__(creator, int(config.get(NUM_AGENTS_KEY, 1)), inner)
            # classic MultiEnv's shared spaces (every copy has its env's)
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space

    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent{creator.name}"
    return MultiEnv


class BasicMultiAgent(IndependentCopiesEnv):
    """`num` independent agents, each terminated after 25 steps (`MockEnv(25)`)."""

    def __init__(self, num: int):
        super().__init__(lambda _config: MockEnv(25), num)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space


MultiAgentCartPole = make_multiagent("CartPole-v0")
MultiAgentMountainCar = make_multiagent("MountainCarContinuous-v0")
MultiAgentPendulum = make_multiagent("Pendulum-v1")

__all__ = ["make_multiagent", "BasicMultiAgent", "MultiAgentCartPole", "MultiAgentMountainCar",
           "MultiAgentPendulum"]
