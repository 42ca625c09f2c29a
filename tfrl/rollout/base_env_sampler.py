"""BaseEnvRunner: the multi-agent env runner (multi_agent_sampler.py) polling classic RLlib's
`BaseEnv`.

A worker whose env creator returns a BaseEnv (tfrl/env/base_env.py) samples it with this
subclass of `MultiAgentEnvRunner`, which keeps that runner's per-agent rows, batched policy
calls and postprocessing and replaces its env calls with classic RLlib's loop: `poll()`, the
agents with an observation act (one `compute_actions` per policy for all of them), then
`send_actions` with an action dict for every sub-env the poll returned (empty where no agent
acts), and `poll()` again. A sub-env id the runner does not know yet starts an episode with the
observations it comes with; one whose `dones["__all__"]` is set ends its episode and is reset
with `try_reset(env_id)`, whose observations start the next one (None or ASYNC_RESET_RETURN:
the sub-env's next observations in a later poll do). An agent's off-policy action (the poll's
fifth dict) replaces the policy's in its row, with its likelihood recomputed. Dones are read as
classic_api.py reads them; the worker's `horizon`, `soft_horizon` and `no_done_at_end` apply as
tfrl/env/horizon.py applies them to a MultiAgentEnv.

The worker is multi-agent (a MultiAgentBatch from `sample()`) when its policies are not the
single default policy, as classic RLlib decided; otherwise `sample()` returns that policy's
SampleBatch and every agent (a single-agent BaseEnv's `_DUMMY_AGENT_ID`) maps to it.
"""
from __future__ import annotations

import time
from typing import Any, List, Optional

from tfrl import errors
from tfrl.env.classic_api import split_classic_dones
from tfrl.env.horizon import horizon_outcome_of_agents
from tfrl.env.multi_agent_env import ALL_AGENTS
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.multi_agent_sampler import MultiAgentEnvRunner
from tfrl.rollout.trajectory import guard_env_call, take_logged_actions


class BaseEnvRunner(MultiAgentEnvRunner):
    """Samples one BaseEnv with a map of policies (module docstring). Arguments as
    `MultiAgentEnvRunner`'s, with `base_env` instead of the envs and their seeds (callbacks
    get it as `base_env`), and `multi_agent` False for a worker of the default policy alone."""

    def __init__(self, worker, base_env, env_name, policy_map, policy_mapping_fn, filters,
                 callbacks, settings, adapters, observation_fn=None, multi_agent=True):
        self.base_env = base_env
        self.multi_agent = multi_agent
        self._limits = (settings.horizon is not None or settings.soft_horizon
                        or settings.no_done_at_end)
        self._polled = False
        self._ready: List[Any] = []  # the env ids the next send_actions gives an action dict
        self._off_policy: dict = {}  # env id -> agent id -> the action it took itself
        super().__init__(worker, base_env, env_name, policy_map, policy_mapping_fn, filters,
                         callbacks, None, settings, adapters, observation_fn=observation_fn)

    def _start_envs(self, env_seeds) -> None:
        pass  # the first step polls (a rebuilt runner adopts the running episodes first)

    def adopt(self, old: "BaseEnvRunner") -> None:
        """Carries the running episodes of the runner this one replaces (a policy swap)."""
        for name in ("_states", "_polled", "_ready", "_off_policy", "_agent_indices",
                     "seen_agent_ids", "_finished_metrics", "env_steps_sampled"):
            setattr(self, name, getattr(old, name))

    def sample(self, explore: bool = True, timestep: Optional[int] = None):
        """One fragment: a MultiAgentBatch, or for a single-agent worker its policy's batch.

        Raises:
          InvalidEnvError: a poll result that is not five dicts, or dones without `"__all__"`.
          InvalidConfigError: a `horizon` while `try_reset` returns None.
          EnvCrashError: the BaseEnv raised.
        """
        batch = super().sample(explore, timestep)
        if self.multi_agent:
            return batch
        return batch.policy_batches.get(next(iter(self.policy_map)), SampleBatch())

    def _step_envs(self, explore, timestep) -> List[list]:
        ended = [] if self._polled else self._poll()
        action_dicts = {env_id: {} for env_id in self._ready}
        self._compute_actions(explore, timestep, action_dicts)
        for env_id in self._ready:
            state = self._states.get(env_id)
            if state is not None:
                state.obs = {}  # they acted; the next poll brings what is due next
        started = time.perf_counter()
        guard_env_call(self.env_name, "send_actions()", self.base_env.send_actions, action_dicts)
        self.perf.add_env_wait(time.perf_counter() - started)
        ended.extend(self._poll())
        return ended

    def _taken_actions(self, policy, pairs, obs, actions, extra) -> tuple:
        if not self._off_policy:
            return actions, extra
        taken = [self._off_policy.get(env_id, {}).get(agent_id) for env_id, agent_id in pairs]
        logged = [j for j, action in enumerate(taken) if action is not None]
        if not logged:
            return actions, extra
        return take_logged_actions(policy, taken, logged, obs, actions, extra)

    def _poll(self) -> List[list]:
        """One poll: new episodes started, steps recorded, ended episodes reset; returns the
        trajectories of the episodes that ended."""
        self._polled = True
        started = time.perf_counter()
        obs, rewards, dones, infos, off_policy = _five_dicts(
            guard_env_call(self.env_name, "poll()", self.base_env.poll), self.env_name)
        self.perf.add_env_wait(time.perf_counter() - started)
        self._ready = []
        self._off_policy = off_policy
        ended = []
        for env_id, agent_obs in obs.items():
            state = self._states.get(env_id)
            if state is None:
                self._start_episode(env_id, agent_obs)
                self._ready.append(env_id)
                continue
            env_dones = dones.get(env_id)
            if not isinstance(env_dones, dict) or ALL_AGENTS not in env_dones:
                raise errors.InvalidEnvError(
                    f"env {self.env_name!r}: a BaseEnv's poll() must give each env it returns "
                    f"observations of a dones dict with the key {ALL_AGENTS!r}, but env "
                    f"{env_id!r} has {env_dones!r:.200}")
            env_infos = infos.get(env_id) or {}
            terminateds, truncateds = split_classic_dones(env_dones, env_infos)
            cut = False
            if self._limits:
                horizon = self.settings.horizon
                at_horizon = horizon is not None and state.episode.length + 1 >= horizon
                terminateds, truncateds, cut = horizon_outcome_of_agents(
                    agent_obs, terminateds, truncateds, at_horizon, self.settings.no_done_at_end)
            env_rewards = {agent_id: reward
                           for agent_id, reward in (rewards.get(env_id) or {}).items()
                           if reward is not None}
            group = self._observe(env_id, agent_obs, env_rewards, terminateds, truncateds,
                                  env_infos)
            if group is None:
                self._ready.append(env_id)
            else:
                ended.append(group)
                self._restart(env_id, agent_obs if cut and self.settings.soft_horizon else None)
        return ended

    def _restart(self, env_id: Any, carried: Optional[dict]) -> None:
        """Starts env `env_id`'s next episode: from `carried` (a soft horizon's observations),
        else from what `try_reset` gives, else (None) from the env's next poll."""
        del self._states[env_id]
        if carried is None:
            started = time.perf_counter()
            carried = guard_env_call(self.env_name, f"try_reset({env_id!r})",
                                     self.base_env.try_reset, env_id)
            self.perf.add_env_wait(time.perf_counter() - started)
            if carried is None and self.settings.horizon is not None:
                raise errors.InvalidConfigError(
                    f"env {self.env_name!r}: horizon {self.settings.horizon} needs a BaseEnv "
                    f"that resets on request, but its try_reset({env_id!r}) returned None; "
                    "implement try_reset or leave horizon unset")
        if isinstance(carried, dict):
            self._start_episode(env_id, carried)
            self._ready.append(env_id)


def _five_dicts(result: Any, env_name: str) -> tuple:
    """A poll's (obs, rewards, dones, infos, off_policy_actions), checked (None: {}).

    Raises:
      InvalidEnvError: not five values, or one of them not a dict.
    """
    if not isinstance(result, (tuple, list)) or len(result) != 5:
        got = f"{len(result)} values" if isinstance(result, (tuple, list)) else type(result).__name__
        raise errors.InvalidEnvError(
            f"env {env_name!r}: a BaseEnv's poll() must return (obs, rewards, dones, infos, "
            f"off_policy_actions), five dicts keyed by env id, but it returned {got}")
    out = tuple({} if value is None else value for value in result)
    for name, value in zip(("obs", "rewards", "dones", "infos", "off_policy_actions"), out):
        if not isinstance(value, dict):
            raise errors.InvalidEnvError(
                f"env {env_name!r}: the {name} of a BaseEnv's poll() must be a dict "
                f"{{env_id: {{agent_id: value}}}}, but it is {type(value).__name__}")
    return out
