"""Classic RLlib's `VectorEnv`: several copies of a single-agent env stepped as one batch.

Sits under tfrl/env next to the classic-API adapters (classic_api.py). A rollout worker whose
env creator returns a VectorEnv samples its `num_envs` sub-envs with one `vector_step` per step
(tfrl/rollout/vector_env_sampler.py) and makes no further copies (`num_envs_per_worker` is not
used, as in classic RLlib 1.x, where a VectorEnv brings its own count). The interface is classic
RLlib's, with classic gym's results: `vector_reset() -> [obs]`, `reset_at(index) -> obs`,
`vector_step(actions) -> (obs, rewards, dones, infos)` (four lists of `num_envs`), and
`get_unwrapped() -> [sub-envs]`. The runner reads each done as classic_api.py does: a
termination unless its info says `TimeLimit.truncated`.

`VectorEnv.wrap` builds one from single-agent envs, given (`existing_envs`) or made by
`make_env(vector_index)`, with classic gym's API or gymnasium's: a gymnasium sub-env's
truncation comes out as a done whose info says `TimeLimit.truncated`, so nothing is lost.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

import numpy as np

from tfrl import errors
from tfrl.env.classic_api import adapt_classic_env, classic_done_and_info, has_classic_reset

# the seeds of a wrapped VectorEnv's sub-envs are this far apart (as a worker's envs are)
SUB_ENV_SEED_STRIDE = 10_000


class VectorEnv:
    """Classic RLlib's batch of single-agent sub-envs (module docstring).

    Args:
      observation_space, action_space: the spaces of one sub-env (gymnasium spaces).
      num_envs: how many sub-envs the VectorEnv steps together.
    """

    def __init__(self, observation_space: Any, action_space: Any, num_envs: int):
        self.observation_space = observation_space
        self.action_space = action_space
        self.num_envs = num_envs

    @staticmethod
    def wrap(make_env: Optional[Callable[[int], Any]] = None,
             existing_envs: Optional[List[Any]] = None, num_envs: int = 1,
             action_space: Any = None, observation_space: Any = None,
             env_config: Optional[dict] = None) -> "VectorEnv":
        """A VectorEnv over `existing_envs`, topped up to `num_envs` with
        `make_env(vector_index)`; the spaces default to the first sub-env's.

        Raises:
          InvalidEnvError: fewer envs than `num_envs` and no `make_env`, or no envs at all.
        """
        return VectorizedGymEnv(make_env=make_env, existing_envs=existing_envs,
                                num_envs=num_envs, observation_space=observation_space,
                                action_space=action_space, env_config=env_config)

    def vector_reset(self) -> List[Any]:
        """Resets every sub-env; returns their observations (a list of `num_envs`)."""
        raise NotImplementedError

    def reset_at(self, index: int) -> Any:
        """Resets sub-env `index`; returns its observation."""
        raise NotImplementedError

    def vector_step(self, actions: List[Any]) -> tuple:
        """Steps every sub-env with its action; returns (obs, rewards, dones, infos), four lists
        of `num_envs`."""
        raise NotImplementedError

    def get_unwrapped(self) -> List[Any]:
        """The sub-envs, where the VectorEnv has them as objects (here: none; classic RLlib's
        base class raised NotImplementedError)."""
        return []

    def close(self) -> None:
        """Closes the sub-envs `get_unwrapped` gives (not in classic RLlib's interface; the
        rollout worker calls it when it stops)."""
        for env in self.get_unwrapped():
            close = getattr(env, "close", None)
            if callable(close):
                close()


class VectorizedGymEnv(VectorEnv):
    """What `VectorEnv.wrap` returns: a VectorEnv stepping its sub-envs in a loop (classic
    RLlib's `_VectorizedGymEnv`). `envs` are the sub-envs as given or made; each is stepped
    through gymnasium's API (a classic one through its adapter, classic_api.py) and its
    results handed out in classic gym's."""

    def __init__(self, make_env: Optional[Callable[[int], Any]] = None,
                 existing_envs: Optional[List[Any]] = None, num_envs: int = 1, *,
                 observation_space: Any = None, action_space: Any = None,
                 env_config: Optional[dict] = None):
        self.make_env = make_env
        self.env_config = env_config
        self.envs = list(existing_envs or [])
        if len(self.envs) < num_envs and make_env is None:
            raise errors.InvalidEnvError(
                f"VectorEnv.wrap: {len(self.envs)} existing envs but num_envs={num_envs}, and "
                "no make_env to make the others; pass make_env(vector_index) or more envs")
        while len(self.envs) < num_envs:
            self.envs.append(make_env(len(self.envs)))
        if not self.envs:
            raise errors.InvalidEnvError("VectorEnv.wrap: no envs; pass existing_envs or "
                                         "make_env with num_envs >= 1")
        self._stepped = [adapt_classic_env(env, type(env).__name__) for env in self.envs]
        self._seeds: List[Optional[int]] = [None] * len(self.envs)
        super().__init__(observation_space or self.envs[0].observation_space,
                         action_space or self.envs[0].action_space, len(self.envs))

    def seed(self, seed: Optional[int] = None) -> None:
        """Seeds sub-env j with `seed + SUB_ENV_SEED_STRIDE * j`: a classic sub-env through its
        `seed` method, a gymnasium one at its next reset. The rollout worker calls it with its
        seed, as classic RLlib called `env.seed`."""
        for j, env in enumerate(self.envs):
            sub_seed = None if seed is None else seed + SUB_ENV_SEED_STRIDE * j
            if has_classic_reset(env):
                if callable(getattr(env, "seed", None)):
                    env.seed(sub_seed)
            else:
                self._seeds[j] = sub_seed

    def vector_reset(self) -> List[Any]:
        return [self.reset_at(i) for i in range(self.num_envs)]

    def reset_at(self, index: int) -> Any:
        seed, self._seeds[index] = self._seeds[index], None
        obs, _info = self._stepped[index].reset(seed=seed)
        return obs

    def vector_step(self, actions: List[Any]) -> tuple:
        """Steps each sub-env; a truncation comes out as a done whose info says
        `TimeLimit.truncated`.

        Raises:
          InvalidEnvError: a sub-env's reward is not a finite number or its info not a dict.
        """
        obs_list, rewards, dones, infos = [], [], [], []
        for i, env in enumerate(self._stepped):
            obs, reward, terminated, truncated, info = env.step(actions[i])
            if not np.isscalar(reward) or not np.isfinite(reward):
                raise errors.InvalidEnvError(
                    f"VectorEnv sub-env {i} ({type(self.envs[i]).__name__}) returned reward "
                    f"{reward!r}; a step's reward must be one finite number")
            if not isinstance(info, dict):
                raise errors.InvalidEnvError(
                    f"VectorEnv sub-env {i} ({type(self.envs[i]).__name__}) returned info "
                    f"{info!r:.100}; a step's info must be a dict")
            done, info = classic_done_and_info(terminated, truncated, info)
            obs_list.append(obs)
            rewards.append(reward)
            dones.append(done)
            infos.append(info)
        return obs_list, rewards, dones, infos

    def get_unwrapped(self) -> List[Any]:
        return self.envs


__all__ = ["VectorEnv", "VectorizedGymEnv", "SUB_ENV_SEED_STRIDE"]
