"""Classic RLlib's episode horizon over tfrl's rollout: `horizon`, `soft_horizon`, `no_done_at_end`.

Sits under tfrl/env next to the classic-API adapters; the rollout worker wraps each env it
creates with `limit_episodes` when the config asks for any of the three (tfrl/rollout/settings.py
documents the keys). Classic RLlib cut episodes in its sampler; here the cut is a wrapper that
reports it as gymnasium's TimeLimit does, as a truncation (`truncated` True, `terminated` False),
so the runners end the episode there and the postprocessors bootstrap from the last observation's
value instead of treating it as terminal.

- `horizon` N: an episode is truncated at its N-th step unless the env ended it on that step.
- `soft_horizon`: at the horizon the episode ends (metrics, a new episode id) but the env is not
  reset: the next episode starts from the observation the truncated one ended on. Only an
  episode the env itself ended resets it.
- `no_done_at_end`: the env's own terminations are reported as truncations, so no episode ends
  terminal (classic RLlib's "don't set done at the end").

Other attributes are read from the wrapped env (`foreach_env` reaches the user's methods).
Classic RLlib's `VectorEnv` and `BaseEnv` are not wrapped: their runners apply the same rules
(`horizon_outcome`, `horizon_outcome_of_agents`) to each sub-env's steps.
"""
from __future__ import annotations

from typing import Any, Optional

from tfrl import errors
from tfrl.env.base_env import BaseEnv
from tfrl.env.external_env import ExternalEnv
from tfrl.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from tfrl.env.vector_env import VectorEnv


def limit_episodes(env: Any, env_name: str, horizon: Optional[int], soft_horizon: bool,
                   no_done_at_end: bool) -> Any:
    """`env` itself when none of the three settings is on, else `env` wrapped to apply them.

    Raises:
      InvalidConfigError: `soft_horizon` without a `horizon`, or any of the three on an
        ExternalEnv (its client, not the sampler, ends its episodes).
    """
    if horizon is None and not soft_horizon and not no_done_at_end:
        return env
    if soft_horizon and horizon is None:
        raise errors.InvalidConfigError(
            "soft_horizon True needs a horizon (the step count at which episodes end without "
            "an env reset); set horizon or leave soft_horizon False")
    if isinstance(env, ExternalEnv):
        raise errors.InvalidConfigError(
            f"env {env_name!r} is an ExternalEnv, whose episodes its client starts and ends: "
            "horizon, soft_horizon and no_done_at_end do not apply to it; end the episodes in "
            "the client or leave the keys unset")
    if isinstance(env, (VectorEnv, BaseEnv)):
        return env  # their runners count each sub-env's steps (module docstring)
    if isinstance(env, MultiAgentEnv):
        return MultiAgentHorizonLimit(env, horizon, soft_horizon, no_done_at_end)
    return HorizonLimit(env, horizon, soft_horizon, no_done_at_end)


def horizon_outcome(terminated: bool, truncated: bool, at_horizon: bool,
                    no_done_at_end: bool) -> tuple:
    """(terminated, truncated, cut) of one single-agent step under the three settings: with
    `no_done_at_end` a termination is reported as a truncation; a step `at_horizon` that the env
    did not end is truncated, and `cut` says so (a soft horizon then carries its observation)."""
    if no_done_at_end and terminated:
        return False, True, False
    if at_horizon and not terminated and not truncated:
        return False, True, True
    return bool(terminated), bool(truncated), False


def horizon_outcome_of_agents(obs: dict, terminateds: dict, truncateds: dict, at_horizon: bool,
                              no_done_at_end: bool) -> tuple:
    """(terminateds, truncateds, cut) of one multi-agent step (copies of the dicts): as
    `horizon_outcome`, at the horizon every agent in `obs` and `"__all__"` truncated unless
    the episode ended."""
    terminateds, truncateds = dict(terminateds), dict(truncateds)
    if no_done_at_end:
        for agent, value in list(terminateds.items()):
            if value:
                terminateds[agent] = False
                truncateds[agent] = True
    ended = terminateds.get(ALL_AGENTS, False) or truncateds.get(ALL_AGENTS, False)
    if not at_horizon or ended:
        return terminateds, truncateds, False
    for agent in list(obs) + [ALL_AGENTS]:
        if not terminateds.get(agent, False):
            truncateds[agent] = True
    return terminateds, truncateds, True


class _Limit:
    """The step count and soft-horizon state both wrappers share."""

    def __init__(self, env: Any, horizon: Optional[int], soft_horizon: bool,
                 no_done_at_end: bool):
        self.env = env
        self.horizon = horizon
        self.soft_horizon = soft_horizon
        self.no_done_at_end = no_done_at_end
        self.episode_steps = 0
        # soft horizon: the (obs, info) the truncated episode ended on, the next one's start
        self._carried: Optional[tuple] = None

    def _count_step(self) -> bool:
        """Counts a step; True when it reaches the horizon."""
        self.episode_steps += 1
        return self.horizon is not None and self.episode_steps >= self.horizon

    def _reset(self, seed, options):
        self.episode_steps = 0
        if self._carried is not None and seed is None and options is None:
            carried, self._carried = self._carried, None
            return carried
        self._carried = None
        return self.env.reset(seed=seed, options=options)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)


class HorizonLimit(_Limit):
    """A single-agent env (gymnasium's API) with classic RLlib's horizon (module docstring)."""

    def __init__(self, env: Any, horizon: Optional[int], soft_horizon: bool = False,
                 no_done_at_end: bool = False):
        super().__init__(env, horizon, soft_horizon, no_done_at_end)
        self.observation_space = getattr(env, "observation_space", None)
        self.action_space = getattr(env, "action_space", None)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """The env's reset, or with `soft_horizon` after a truncation at the horizon, the
        observation and info that episode ended on (a seed or options reset the env anyway)."""
        return self._reset(seed, options)

    def step(self, action: Any):
        """The env's step, truncated at the horizon; with `no_done_at_end` a termination is
        reported as a truncation."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        terminated, truncated, cut = horizon_outcome(terminated, truncated, self._count_step(),
                                                     self.no_done_at_end)
        if cut and self.soft_horizon:
            self._carried = (obs, info)
        return obs, reward, terminated, truncated, info


class MultiAgentHorizonLimit(_Limit, MultiAgentEnv):
    """A MultiAgentEnv (tfrl's 5-dict API) with classic RLlib's horizon: at the horizon every
    agent that observed this step and `"__all__"` are truncated (module docstring)."""

    def __init__(self, env: MultiAgentEnv, horizon: Optional[int], soft_horizon: bool = False,
                 no_done_at_end: bool = False):
        _Limit.__init__(self, env, horizon, soft_horizon, no_done_at_end)

    # the base class declares these as class attributes: read them from the wrapped env
    possible_agents = property(lambda self: getattr(self.env, "possible_agents", []))
    observation_spaces = property(lambda self: getattr(self.env, "observation_spaces", None) or {})
    action_spaces = property(lambda self: getattr(self.env, "action_spaces", None) or {})
    observation_space = property(lambda self: getattr(self.env, "observation_space", None))
    action_space = property(lambda self: getattr(self.env, "action_space", None))

    def get_observation_space(self, agent_id):
        return self.env.get_observation_space(agent_id)

    def get_action_space(self, agent_id):
        return self.env.get_action_space(agent_id)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """As HorizonLimit.reset, with dicts of observations and infos."""
        return self._reset(seed, options)

    def step(self, action_dict):
        """The env's step; at the horizon every agent observed and `"__all__"` truncated unless
        the episode terminated; with `no_done_at_end` terminations become truncations."""
        obs, rewards, terminateds, truncateds, infos = self.env.step(action_dict)
        terminateds, truncateds, cut = horizon_outcome_of_agents(
            obs, terminateds, truncateds, self._count_step(), self.no_done_at_end)
        if cut and self.soft_horizon:
            self._carried = (obs, infos)
        return obs, rewards, terminateds, truncateds, infos
