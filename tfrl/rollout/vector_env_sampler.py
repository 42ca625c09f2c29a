"""VectorEnvRunner: the single-agent env runner (sampler.py) over classic RLlib's `VectorEnv`.

A worker whose env creator returns a VectorEnv (tfrl/env/vector_env.py) samples it with this
subclass of `EnvRunner`: the same columnar buffers, one batched policy call and one
`vector_step` per step for all `num_envs` sub-envs, `reset_at(i)` for a sub-env whose episode
ended, and `vector_reset()` once at the start. Each `vector_step` result is checked (four lists of
`num_envs`) and its classic dones read as classic_api.py does (a termination unless the info
says `TimeLimit.truncated`). The worker's `horizon`, `soft_horizon` and `no_done_at_end` apply
to each sub-env as tfrl/env/horizon.py applies them to one env. A worker seed reaches the
VectorEnv through its `seed` method where it has one (classic RLlib's `env.seed`), not through
the resets. The plain runner's per-step path is unchanged: only these three env calls differ.
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from tfrl import errors
from tfrl.env.classic_api import looks_like_obs_and_info, split_done
from tfrl.env.horizon import horizon_outcome
from tfrl.env.vector_env import VectorEnv
from tfrl.rollout.sampler import EnvRunner
from tfrl.rollout.trajectory import guard_env_call


class SubEnvs(list):
    """A VectorEnv's sub-envs as the list a runner's callbacks get as `base_env` (tfrl passes a
    list of envs): its `get_unwrapped()` where that gives `num_envs` of them, else the
    VectorEnv itself `num_envs` times. `vector_env` is the VectorEnv; `get_unwrapped()` answers
    as classic RLlib's BaseEnv over it did."""

    def __init__(self, vector_env: VectorEnv):
        unwrapped = list(vector_env.get_unwrapped() or [])
        if len(unwrapped) != vector_env.num_envs:
            unwrapped = [vector_env] * vector_env.num_envs
        super().__init__(unwrapped)
        self.vector_env = vector_env

    def get_unwrapped(self) -> List[Any]:
        return self.vector_env.get_unwrapped()


class VectorEnvRunner(EnvRunner):
    """Samples a VectorEnv's sub-envs with one policy (module docstring). Arguments as
    `EnvRunner`'s, with `vector_env` instead of the envs and their seeds."""

    def __init__(self, worker, vector_env: VectorEnv, env_name: str, policy, policy_id: str,
                 obs_filter, callbacks, settings, action_adapter):
        self.vector_env = vector_env
        n = vector_env.num_envs
        self._limits = (settings.horizon is not None or settings.soft_horizon
                        or settings.no_done_at_end)
        self._episode_steps = np.zeros(n, np.int64)
        self._carried: dict = {}  # soft horizon: sub-env -> the observation its next episode starts from
        super().__init__(worker, SubEnvs(vector_env), env_name, policy, policy_id, obs_filter,
                         callbacks, None, settings, action_adapter)

    def _first_observations(self, env_seeds) -> list:
        obs = guard_env_call(self.env_name, "vector_reset()", self.vector_env.vector_reset)
        if not isinstance(obs, (list, tuple)) or len(obs) != self.num_envs:
            got = f"{len(obs)} values" if isinstance(obs, (list, tuple)) else type(obs).__name__
            raise errors.InvalidEnvError(
                f"env {self.env_name!r}: a VectorEnv's vector_reset() must return a list of "
                f"num_envs={self.num_envs} observations, but it returned {got}; return one "
                "observation per sub-env")
        self._check_observation(obs[0], "vector_reset()")
        return list(obs)

    def _check_observation(self, obs: Any, call: str) -> None:
        if looks_like_obs_and_info(obs, self._obs_space):
            raise errors.InvalidEnvError(
                f"env {self.env_name!r}: the VectorEnv's {call} gave an (obs, info) pair, "
                "gymnasium's reset result; a VectorEnv returns observations alone (classic "
                "RLlib's API)")

    def _reset_env(self, i: int, seed: Optional[int] = None):
        self._episode_steps[i] = 0
        carried = self._carried.pop(i, None)
        if carried is not None:
            return carried
        obs = guard_env_call(self.env_name, f"reset_at({i})", self.vector_env.reset_at, i)
        self._check_observation(obs, f"reset_at({i})")
        return obs

    def _step_all(self, env_actions: list) -> list:
        """One `vector_step`; each sub-env's (obs, reward, terminated, truncated, info).

        Raises:
          InvalidEnvError: the result is not four lists of `num_envs` values.
        """
        obs, rewards, dones, infos = _four_lists(self.vector_env.vector_step(env_actions),
                                                 self.num_envs, self.env_name)
        terminateds, truncateds = [], []
        for i in range(self.num_envs):
            terminated, truncated = split_done(dones[i], infos[i])
            if self._limits:
                terminated, truncated = self._limit(i, obs[i], terminated, truncated)
            terminateds.append(terminated)
            truncateds.append(truncated)
        return list(zip(obs, rewards, terminateds, truncateds, infos))

    def _limit(self, i: int, obs: Any, terminated: bool, truncated: bool) -> tuple:
        settings = self.settings
        self._episode_steps[i] += 1
        at_horizon = settings.horizon is not None and self._episode_steps[i] >= settings.horizon
        terminated, truncated, cut = horizon_outcome(terminated, truncated, at_horizon,
                                                     settings.no_done_at_end)
        if cut and settings.soft_horizon:
            self._carried[i] = obs
        return terminated, truncated


def _four_lists(result: Any, num_envs: int, env_name: str) -> tuple:
    """`vector_step`'s (obs, rewards, dones, infos), checked.

    Raises:
      InvalidEnvError: not four values, or one of them not a list of `num_envs`.
    """
    if not isinstance(result, (tuple, list)) or len(result) != 4:
        got = f"{len(result)} values" if isinstance(result, (tuple, list)) else type(result).__name__
        raise errors.InvalidEnvError(
            f"env {env_name!r}: a VectorEnv's vector_step() must return (obs, rewards, dones, "
            f"infos), four lists of num_envs={num_envs}, but it returned {got}")
    for name, values in zip(("obs", "rewards", "dones", "infos"), result):
        if not isinstance(values, (list, tuple, np.ndarray)) or len(values) != num_envs:
            got = (f"{len(values)} values" if isinstance(values, (list, tuple, np.ndarray))
                   else type(values).__name__)
            raise errors.InvalidEnvError(
                f"env {env_name!r}: the {name} of a VectorEnv's vector_step() must be a list of "
                f"num_envs={num_envs} values (one per sub-env), but it has {got}; return one "
                "value per sub-env, in sub-env order")
    return result
