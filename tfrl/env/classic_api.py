"""Adapters from classic gym's env API to the one tfrl samples (gymnasium's).

Sits under tfrl/env next to the registry, which wraps every env a creator returns through
`adapt_classic_env` once, at creation. Classic envs (gym < 0.26, classic RLlib's
`MultiAgentEnv`) have `reset()` without `seed`/`options` returning only the observation(s), and
`step` returning 4 values `(obs, reward, done, info)` (multi-agent: 4 dicts, `dones["__all__"]`
ending the episode). The adapters give `reset(seed=None, options=None) -> (obs, info)` and
gymnasium's 5-tuple step (multi-agent: tfrl's 5 dicts with `"__all__"` in terminateds and
truncateds). A classic `done` is a termination, unless its info carries
`TimeLimit.truncated` (classic gym's TimeLimit wrapper): then it is a truncation.

An env is classic when its `reset` accepts no `seed` argument (gymnasium's and tfrl's do); this
is decided once, from the signature, so modern envs are returned as they are and their step
path does not change. A classic env's `step` must then return 4 values, else `InvalidEnvError`.

The same mapping serves classic RLlib's `VectorEnv` and `BaseEnv` (vector_env.py, base_env.py),
whose results are classic too: `split_classic_dones` reads a dones dict, and
`classic_done_and_info` / `classic_dones_and_infos` go the other way for their adapters over
gymnasium envs, a truncation becoming a done whose info says `TimeLimit.truncated`.
"""
from __future__ import annotations

import inspect
import logging
from typing import Any, Optional

from tfrl import errors
from tfrl.env.external_env import ExternalEnv
from tfrl.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv

logger = logging.getLogger(__name__)

TIME_LIMIT_TRUNCATED = "TimeLimit.truncated"

_warned_classes: set = set()


def has_classic_reset(env: Any) -> bool:
    """Whether `env.reset` is classic gym's: it takes no `seed` argument (nor **kwargs)."""
    reset = getattr(env, "reset", None)
    if not callable(reset):
        return False
    try:
        params = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: assume gymnasium's API
        return False
    return not any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def adapt_classic_env(env: Any, env_name: str) -> Any:
    """Returns `env` itself when it has gymnasium's (or tfrl's multi-agent) API, else an adapter.

    A `MultiAgentEnv` with a classic `reset` gets a `ClassicMultiAgentEnvAdapter`, any other env
    with one a `ClassicEnvAdapter`; a warning says so, once per env class and process.
    """
    if isinstance(env, ExternalEnv) or not callable(getattr(env, "step", None)) \
            or not has_classic_reset(env):
        return env
    cls = type(env)
    if cls not in _warned_classes:
        _warned_classes.add(cls)
        logger.warning(
            "env %r (%s) has classic gym's API (reset() without seed, 4-value step); tfrl adapts "
            "it to gymnasium's: a done is a termination unless its info says %r. Port the env to "
            "gymnasium's API to silence this", env_name, cls.__qualname__, TIME_LIMIT_TRUNCATED)
    if isinstance(env, MultiAgentEnv):
        return ClassicMultiAgentEnvAdapter(env, env_name)
    return ClassicEnvAdapter(env, env_name)


def _seed_classic(env: Any, seed: Optional[int]) -> None:
    # classic gym seeded through env.seed(seed), not through reset
    if seed is not None and callable(getattr(env, "seed", None)):
        env.seed(seed)


def split_done(done: Any, info: Any) -> tuple:
    """(terminated, truncated) of one classic done and its info."""
    truncated = bool(done) and isinstance(info, dict) and bool(info.get(TIME_LIMIT_TRUNCATED, False))
    return bool(done) and not truncated, truncated


def split_classic_dones(dones: dict, infos: Any) -> tuple:
    """(terminateds, truncateds), each with `"__all__"`, of a classic multi-agent dones dict
    (which must hold `"__all__"`) and its infos dict (agent id -> info, or None).

    An agent's done is a truncation when its info says `TimeLimit.truncated`. `"__all__"` is a
    truncation when the episode ends with truncated agents and no terminated one; where the
    dones name no agent but `"__all__"`, when an agent's info says `TimeLimit.truncated`.
    """
    infos = infos or {}
    terminateds, truncateds = {}, {}
    for agent, done in dones.items():
        if agent != ALL_AGENTS:
            terminateds[agent], truncateds[agent] = split_done(done, infos.get(agent))
    all_done = bool(dones[ALL_AGENTS])
    if terminateds:
        all_truncated = all_done and any(truncateds.values()) and not any(terminateds.values())
    else:
        all_truncated = all_done and any(isinstance(info, dict) and info.get(TIME_LIMIT_TRUNCATED)
                                         for info in infos.values())
    terminateds[ALL_AGENTS] = all_done and not all_truncated
    truncateds[ALL_AGENTS] = all_truncated
    return terminateds, truncateds


def classic_done_and_info(terminated: Any, truncated: Any, info: Any) -> tuple:
    """Classic gym's (done, info) of gymnasium's terminated and truncated: a truncation is a done
    whose info (a copy) says `TimeLimit.truncated`."""
    if truncated and not terminated:
        info = dict(info or {})
        info[TIME_LIMIT_TRUNCATED] = True
    return bool(terminated or truncated), info


def classic_dones_and_infos(terminateds: dict, truncateds: dict, infos: dict) -> tuple:
    """Classic multi-agent (dones, infos) of tfrl's terminateds and truncateds dicts (the inverse
    of `split_classic_dones`): an episode truncated as a whole marks every agent of the dicts
    that did not terminate as done and truncated."""
    infos = dict(infos or {})
    all_truncated = bool(truncateds.get(ALL_AGENTS)) and not terminateds.get(ALL_AGENTS)
    dones = {}
    for agent in {**terminateds, **truncateds}:
        if agent == ALL_AGENTS:
            continue
        term = bool(terminateds.get(agent))
        trunc = bool(truncateds.get(agent)) or (all_truncated and not term)
        dones[agent], info = classic_done_and_info(term, trunc, infos.get(agent))
        if info is not None:
            infos[agent] = info
    dones[ALL_AGENTS] = bool(terminateds.get(ALL_AGENTS) or truncateds.get(ALL_AGENTS))
    return dones, infos


def looks_like_obs_and_info(value: Any, space: Any) -> bool:
    """Whether a classic reset's observation is really gymnasium's `(obs, info)` pair."""
    import gymnasium

    return (isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict)
            and not isinstance(space, gymnasium.spaces.Tuple))


def _mixed_reset_error(env_name: str, who: str) -> errors.InvalidEnvError:
    return errors.InvalidEnvError(
        f"env {env_name!r}: its reset() takes no seed (classic gym's API), but {who} an "
        "(obs, info) pair, gymnasium's reset result (a classic env stepping gymnasium envs "
        "inside?). Give the env one API: gymnasium's (reset(seed=None, options=None) -> "
        "(obs, info), 5-value step) or classic gym's (reset() -> obs, 4-value step)")


def _four_values(result: Any, env_name: str, what: str) -> tuple:
    if not isinstance(result, tuple) or len(result) != 4:
        got = f"{len(result)} values" if isinstance(result, tuple) else type(result).__name__
        raise errors.InvalidEnvError(
            f"env {env_name!r}: its reset() takes no seed (classic gym's API), so step() must "
            f"return 4 values ({what}), but it returned {got}: {result!r:.200}. Give the env "
            "gymnasium's API (reset(seed=None, options=None) -> (obs, info), 5-value step) or "
            "classic gym's, not a mix")
    return result


class ClassicEnvAdapter:
    """A classic single-agent env with gymnasium's API (see the module docstring).

    Other attributes are read from the wrapped env, which `unwrapped_classic` holds.
    """

    def __init__(self, env: Any, env_name: str):
        self.unwrapped_classic = env
        self.env_name = env_name
        self.observation_space = getattr(env, "observation_space", None)
        self.action_space = getattr(env, "action_space", None)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """The wrapped env's observation and an empty info.

        Raises:
          InvalidEnvError: the classic reset returned gymnasium's (obs, info) pair.
        """
        _seed_classic(self.unwrapped_classic, seed)
        obs = self.unwrapped_classic.reset()
        if looks_like_obs_and_info(obs, self.observation_space):
            raise _mixed_reset_error(self.env_name, "it returned")
        return obs, {}

    def step(self, action: Any):
        """gymnasium's `(obs, reward, terminated, truncated, info)` of the classic 4-value step.

        Raises:
          InvalidEnvError: the env's step returned anything but 4 values.
        """
        obs, reward, done, info = _four_values(self.unwrapped_classic.step(action), self.env_name,
                                               "obs, reward, done, info")
        terminated, truncated = split_done(done, info)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        close = getattr(self.unwrapped_classic, "close", None)
        if callable(close):
            close()

    def __getattr__(self, name: str) -> Any:
        if name == "unwrapped_classic":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.unwrapped_classic, name)


class ClassicMultiAgentEnvAdapter(MultiAgentEnv):
    """A classic multi-agent env (4 dicts, `dones["__all__"]`) with tfrl's 5-dict API.

    An agent's done is a truncation when its info says `TimeLimit.truncated`; `"__all__"` is a
    truncation when the episode ends with truncated agents and no terminated one this step.
    """

    def __init__(self, env: MultiAgentEnv, env_name: str):
        self.unwrapped_classic = env
        self.env_name = env_name

    # the base class declares these as class attributes: read them from the wrapped env
    possible_agents = property(lambda self: getattr(self.unwrapped_classic, "possible_agents", []))
    observation_spaces = property(
        lambda self: getattr(self.unwrapped_classic, "observation_spaces", None) or {})
    action_spaces = property(lambda self: getattr(self.unwrapped_classic, "action_spaces", None) or {})

    def get_observation_space(self, agent_id):
        return self.unwrapped_classic.get_observation_space(agent_id)

    def get_action_space(self, agent_id):
        return self.unwrapped_classic.get_action_space(agent_id)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """The wrapped env's observation dict and empty infos.

        Raises:
          InvalidEnvError: the env's reset returned no dict, or gymnasium's (obs, info) pair as
            an agent's observation.
        """
        _seed_classic(self.unwrapped_classic, seed)
        obs = self.unwrapped_classic.reset()
        if not isinstance(obs, dict):
            raise errors.InvalidEnvError(
                f"env {self.env_name!r}: a classic MultiAgentEnv's reset() must return a dict "
                f"agent id -> observation, but it returned {type(obs).__name__}: {obs!r:.200}")
        for agent, value in obs.items():
            if looks_like_obs_and_info(value, self._space_or_none(agent)):
                raise _mixed_reset_error(self.env_name, f"its observation of agent {agent!r} is")
        return obs, {}

    def _space_or_none(self, agent_id):
        try:
            return self.get_observation_space(agent_id)
        except errors.TfrlError:
            return None

    def step(self, action_dict):
        """tfrl's `(obs, rewards, terminateds, truncateds, infos)` of the classic 4-dict step.

        Raises:
          InvalidEnvError: the env's step returned anything but 4 values, or dones without
            `"__all__"`.
        """
        obs, rewards, dones, infos = _four_values(
            self.unwrapped_classic.step(action_dict), self.env_name,
            "obs, rewards, dones, infos dicts")
        if not isinstance(dones, dict) or ALL_AGENTS not in dones:
            raise errors.InvalidEnvError(
                f"env {self.env_name!r}: a classic MultiAgentEnv's step() must return a dones dict "
                f"with the key {ALL_AGENTS!r}, but it returned {dones!r:.200}")
        infos = infos or {}
        terminateds, truncateds = split_classic_dones(dones, infos)
        return obs, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        self.unwrapped_classic.close()

    def __getattr__(self, name: str) -> Any:
        if name == "unwrapped_classic":
            raise AttributeError(name)
        return getattr(self.unwrapped_classic, name)
