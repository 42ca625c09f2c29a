"""Classic RLlib's `BaseEnv`: agents of several sub-envs polled for observations and sent actions.

Sits under tfrl/env next to vector_env.py. A rollout worker whose env creator returns a BaseEnv
samples it by polling (tfrl/rollout/base_env_sampler.py): `poll()` gives the ready agents' data
as dicts {env_id: {agent_id: value}} (observations, rewards, dones with `"__all__"` per env,
infos, off-policy actions), the agents with an observation act, and `send_actions` gets
{env_id: {agent_id: action}}; an ended sub-env is reset with `try_reset(env_id)` (None: the
env resets itself and its next observation starts a new episode). Dones are classic gym's: a
done is a termination unless its info says `TimeLimit.truncated` (classic_api.py). A
single-agent BaseEnv names its agent `_DUMMY_AGENT_ID` and sets `observation_space` /
`action_space`; any agent id maps to the only policy.

`BaseEnv.to_base_env` adapts the other env types as classic RLlib did: a gymnasium or classic
gym env through `VectorEnv.wrap` (`_VectorEnvToBaseEnv`), a `MultiAgentEnv` (`_MultiAgentEnvToBaseEnv`,
either API); `remote_envs` (sub-envs as Ray actors) and ExternalEnvs are not supported (a worker
samples an ExternalEnv given as it is). tfrl's own MultiAgentEnv results pass through classic
dones here, so an episode truncated as a whole truncates each of its agents.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from tfrl import errors
from tfrl.env.classic_api import adapt_classic_env, classic_dones_and_infos
from tfrl.env.external_env import ExternalEnv
from tfrl.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv
from tfrl.env.vector_env import VectorEnv

# what `try_reset` returns when the reset's observation comes in a later `poll`
ASYNC_RESET_RETURN = "async_reset_return"

# the agent id of a single-agent env's agent (classic RLlib's name and value)
_DUMMY_AGENT_ID = "agent0"


class BaseEnv:
    """Classic RLlib's polled env interface (module docstring).

    Attributes:
      observation_space, action_space: the spaces of a single-agent BaseEnv's agent (None for
        a multi-agent one, whose policy specs give them).
    """

    observation_space: Any = None
    action_space: Any = None

    @staticmethod
    def to_base_env(env: Any, make_env: Optional[Callable[[int], Any]] = None, num_envs: int = 1,
                    remote_envs: bool = False, remote_env_batch_wait_ms: int = 0) -> "BaseEnv":
        """`env` as a BaseEnv: itself if it is one; a VectorEnv, a MultiAgentEnv (with
        `num_envs` copies, the others made by `make_env(vector_index)`) or a gymnasium / classic
        gym env (the same) adapted.

        Raises:
          NotSupportedError: `remote_envs` True, or an ExternalEnv (return the ExternalEnv
            itself from the env creator).
          InvalidEnvError: more copies asked for than given and no `make_env`.
        """
        if remote_envs:
            raise errors.NotSupportedError(
                "BaseEnv.to_base_env(remote_envs=True): tfrl does not run sub-envs as Ray "
                "actors; step them in the worker (remote_envs=False) and scale with "
                "num_workers")
        if isinstance(env, BaseEnv):
            return env
        if isinstance(env, ExternalEnv):
            raise errors.NotSupportedError(
                f"BaseEnv.to_base_env({type(env).__name__}): tfrl samples an ExternalEnv as it "
                "is; return it from the env creator instead of a BaseEnv")
        if isinstance(env, VectorEnv):
            return _VectorEnvToBaseEnv(env)
        if isinstance(env, MultiAgentEnv):
            return _MultiAgentEnvToBaseEnv(make_env, [env], num_envs)
        return _VectorEnvToBaseEnv(VectorEnv.wrap(
            make_env=make_env, existing_envs=[env], num_envs=num_envs,
            action_space=env.action_space, observation_space=env.observation_space))

    def poll(self) -> tuple:
        """(obs, rewards, dones, infos, off_policy_actions) of the ready agents, each a dict
        {env_id: {agent_id: value}}; `dones[env_id]["__all__"]` ends that env's episode. A
        reward is None at an episode's first observation."""
        raise NotImplementedError

    def send_actions(self, action_dict: Dict[Any, Dict[Any, Any]]) -> None:
        """The actions {env_id: {agent_id: action}} of the agents the last poll returned."""
        raise NotImplementedError

    def try_reset(self, env_id: Any = None) -> Optional[dict]:
        """Resets sub-env `env_id`; returns its agents' observations, or None (or
        ASYNC_RESET_RETURN) when they come in a later poll."""
        return None

    def get_unwrapped(self) -> List[Any]:
        """The underlying envs, if any."""
        return []

    def stop(self) -> None:
        """Releases the underlying envs (closes those `get_unwrapped` gives)."""
        for env in self.get_unwrapped():
            close = getattr(env, "close", None)
            if callable(close):
                close()

    def close(self) -> None:
        """`stop()`: the name the rollout worker calls when it stops."""
        self.stop()


def _with_dummy_agent_id(values: Dict[Any, Any], agent_id: Any = _DUMMY_AGENT_ID) -> dict:
    return {env_id: {agent_id: value} for env_id, value in values.items()}


class _VectorEnvToBaseEnv(BaseEnv):
    """A VectorEnv polled: every sub-env is ready at every poll (classic RLlib's adapter). The
    caller sends an action for every sub-env and resets the ended ones before sending."""

    def __init__(self, vector_env: VectorEnv):
        self.vector_env = vector_env
        self.observation_space = vector_env.observation_space
        self.action_space = vector_env.action_space
        self.num_envs = vector_env.num_envs
        self.new_obs: Optional[list] = None  # the first poll resets
        self.cur_rewards: list = [None] * self.num_envs
        self.cur_dones: list = [False] * self.num_envs
        self.cur_infos: list = [{}] * self.num_envs

    def poll(self) -> tuple:
        if self.new_obs is None:
            self.new_obs = self.vector_env.vector_reset()
        out = (_with_dummy_agent_id(dict(enumerate(self.new_obs))),
               _with_dummy_agent_id(dict(enumerate(self.cur_rewards))),
               _with_dummy_agent_id(dict(enumerate(self.cur_dones)), ALL_AGENTS),
               _with_dummy_agent_id(dict(enumerate(self.cur_infos))), {})
        self.new_obs, self.cur_rewards, self.cur_dones, self.cur_infos = [], [], [], []
        return out

    def send_actions(self, action_dict: Dict[Any, Dict[Any, Any]]) -> None:
        actions = [action_dict[i][_DUMMY_AGENT_ID] for i in range(self.num_envs)]
        self.new_obs, self.cur_rewards, self.cur_dones, self.cur_infos = \
            self.vector_env.vector_step(actions)

    def try_reset(self, env_id: Any = None) -> Optional[dict]:
        return {_DUMMY_AGENT_ID: self.vector_env.reset_at(env_id)}

    def get_unwrapped(self) -> List[Any]:
        return self.vector_env.get_unwrapped()


class _MultiAgentEnvToBaseEnv(BaseEnv):
    """MultiAgentEnvs polled, `num_envs` copies (classic RLlib's adapter): each is stepped with
    the actions sent to it and its results come out at the next poll, in classic form. A copy
    with classic RLlib's API is stepped through its adapter (classic_api.py)."""

    def __init__(self, make_env: Optional[Callable[[int], Any]], existing_envs: List[Any],
                 num_envs: int):
        self.envs = list(existing_envs)
        if len(self.envs) < num_envs and make_env is None:
            raise errors.InvalidEnvError(
                f"BaseEnv.to_base_env: {len(self.envs)} MultiAgentEnv(s) but num_envs="
                f"{num_envs}, and no make_env to make the others; pass make_env(vector_index)")
        while len(self.envs) < num_envs:
            self.envs.append(make_env(len(self.envs)))
        for env in self.envs:
            if not isinstance(env, MultiAgentEnv):
                raise errors.InvalidEnvError(
                    f"BaseEnv.to_base_env: {type(env).__name__} is not a MultiAgentEnv, but the "
                    "first env was; make_env must make the same kind of env")
        self._stepped = [adapt_classic_env(env, type(env).__name__) for env in self.envs]
        self._last: List[Optional[tuple]] = [None] * len(self.envs)  # None: not reset yet
        self.dones: set = set()

    def poll(self) -> tuple:
        obs, rewards, dones, infos = {}, {}, {}, {}
        for i in range(len(self.envs)):
            if self._last[i] is None:
                self.try_reset(i)
            obs[i], rewards[i], dones[i], infos[i] = self._last[i]
            self._last[i] = ({}, {}, {ALL_AGENTS: False}, {})
        return obs, rewards, dones, infos, {}

    def send_actions(self, action_dict: Dict[Any, Dict[Any, Any]]) -> None:
        """Steps each env named in `action_dict` with its actions.

        Raises:
          InvalidEnvError: actions for an env whose episode ended and that was not reset.
        """
        for env_id, actions in action_dict.items():
            if env_id in self.dones:
                raise errors.InvalidEnvError(
                    f"env {env_id} of the BaseEnv is done; reset it with try_reset({env_id}) "
                    "before sending it actions")
            obs, rewards, terminateds, truncateds, infos = self._stepped[env_id].step(actions)
            dones, infos = classic_dones_and_infos(terminateds, truncateds, infos)
            if dones[ALL_AGENTS]:
                self.dones.add(env_id)
            self._last[env_id] = (obs, rewards, dones, infos)

    def try_reset(self, env_id: Any = None) -> Optional[dict]:
        obs, infos = self._stepped[env_id].reset()
        self.dones.discard(env_id)
        self._last[env_id] = (obs, {a: None for a in obs}, {ALL_AGENTS: False},
                              {a: (infos or {}).get(a, {}) for a in obs})
        return obs

    def get_unwrapped(self) -> List[Any]:
        return self.envs


__all__ = ["BaseEnv", "ASYNC_RESET_RETURN", "_DUMMY_AGENT_ID"]
