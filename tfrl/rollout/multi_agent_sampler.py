"""Multi-agent env runner: samples `MultiAgentEnv`s with a map of policies.

Per step, the agents present in each env's last observation dict act; they are grouped by policy
(`policy_mapping_fn`, fixed per agent for an episode) and each policy makes one batched
`compute_actions` call for all of its agents in all envs. An agent's row is completed when its
next observation arrives (rewards received in between are summed into it), or when it or the
whole episode (`"__all__"`) terminates or is truncated. Trajectories are postprocessed per agent
with the other agents' raw batches of the same episode as `other_agent_batches`, and the result
is a `MultiAgentBatch` keyed by policy id. A config's `multiagent.observation_fn` (classic
RLlib's) rewrites every observation dict the env gives (after reset and after each step) before
the policies' filters see it. base_env_sampler.py's BaseEnvRunner keeps this bookkeeping
(`_compute_actions`, `_observe`, `_start_episode`) and polls a classic BaseEnv instead of
stepping envs.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Dict, List, Optional

import numpy as np

from tfrl.env.checks import check_observations_finite
from tfrl.env.multi_agent_env import ALL_AGENTS
from tfrl.rollout.episode import Episode
from tfrl.rollout.metrics import RolloutMetrics, SamplerPerfStats
from tfrl.rollout.trajectory import (Trajectory, batched_policy_outputs, clip_rewards,
                                     guard_env_call, next_unroll_id)
from tfrl.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from tfrl.utils.rows import row_of, stack_rows, zero_rows


def observed(runner, obs: dict, episode: Episode) -> dict:
    """The env's observation dict as the runner's `multiagent.observation_fn` rewrites it (as
    it is without one, or when it names no agent: an episode's end without final observations).
    `runner` is a MultiAgentEnvRunner or an ExternalMultiAgentEnvRunner."""
    if runner.observation_fn is None or not obs:
        return obs
    return runner.observation_fn(agent_obs=obs, worker=runner.worker, base_env=runner.envs,
                                 policies=runner.policy_map, episode=episode)


class _EnvState:
    """Episode bookkeeping of one multi-agent env."""

    def __init__(self, episode: Episode):
        self.episode = episode
        self.obs: Dict[Any, Any] = {}          # filtered observation of each agent due to act
        self.pending: Dict[Any, dict] = {}     # agent -> row waiting for its next observation
        self.trajectories: Dict[Any, Trajectory] = {}
        self.states: Dict[Any, list] = {}
        self.done_agents = set()
        # each agent's previous action and reward, for policies that read them (none yet: zeros)
        self.prev_actions: Dict[Any, Any] = {}
        self.prev_rewards: Dict[Any, float] = {}


class MultiAgentEnvRunner:
    """Samples MultiAgentEnvs; see the module docstring. Arguments as `EnvRunner`, with dicts of
    policies, filters and action adapters keyed by policy id."""

    def __init__(self, worker, envs, env_name, policy_map, policy_mapping_fn, filters, callbacks,
                 env_seeds, settings, adapters, observation_fn=None):
        self.worker = worker
        self.envs = envs
        self.env_name = env_name
        self.policy_map = policy_map
        self.policy_mapping_fn = policy_mapping_fn
        self.filters = filters
        self.callbacks = callbacks
        self.settings = settings
        self.adapters = adapters
        self.observation_fn = observation_fn
        self.check_obs = settings.check_observations
        self._initial_states = {pid: [np.asarray(s) for s in (p.get_initial_state() or [])]
                                for pid, p in policy_map.items()}
        self._finished_metrics: List[RolloutMetrics] = []
        self._states: Dict[Any, _EnvState] = {}  # env index (a BaseEnv's env id) -> its state
        self._agent_indices: Dict[Any, int] = {}  # agent id -> agent_index column, worker-wide
        # every agent id met so far, in order (classic envs do not declare their agents)
        self.seen_agent_ids: Dict[Any, None] = {}
        self.env_steps_sampled = 0
        self.perf = SamplerPerfStats()
        self._start_envs(env_seeds)

    def set_filters(self, filters):
        self.filters = filters

    def pop_metrics(self):
        out, self._finished_metrics = self._finished_metrics, []
        return out

    # --- env plumbing (base_env_sampler.py's runner polls a BaseEnv instead) ----------------
    def _start_envs(self, env_seeds) -> None:
        seeds = env_seeds or [None] * len(self.envs)
        for i in range(len(self.envs)):
            self._reset(i, seeds[i])

    def _filter_obs(self, env_state: _EnvState, obs_dict: dict, where: str) -> dict:
        by_policy = defaultdict(list)
        for agent_id in obs_dict:
            by_policy[env_state.episode.policy_for(agent_id)].append(agent_id)
        out = {}
        for pid, agents in by_policy.items():
            space = self.policy_map[pid].observation_space
            raw = stack_rows([obs_dict[a] for a in agents], getattr(space, "original_space", space))
            if self.check_obs:
                check_observations_finite(raw, self.env_name, f"for agent(s) {agents} {where}")
            filtered = self.filters[pid](raw)
            for j, a in enumerate(agents):
                out[a] = row_of(filtered, j)
        return out

    def _reset(self, i: int, seed: Optional[int] = None) -> None:
        started = time.perf_counter()
        obs, _infos = guard_env_call(self.env_name, "reset()", self.envs[i].reset, seed=seed)
        self.perf.add_env_wait(time.perf_counter() - started)
        self._start_episode(i, obs)

    def _start_episode(self, i, obs: dict) -> None:
        """A new episode of env `i` whose agents observed `obs` (the env's dict)."""
        episode = Episode(i, policy_mapping_fn=self.policy_mapping_fn)
        obs = observed(self, obs, episode)
        state = _EnvState(episode)
        self._states[i] = state
        state.obs = self._filter_obs(state, obs, "after reset()")
        for agent_id in obs:
            self._ensure_agent(state, agent_id)
        self.callbacks.on_episode_start(worker=self.worker, base_env=self.envs,
                                        policies=self.policy_map, episode=episode, env_index=i)

    def _ensure_agent(self, state: _EnvState, agent_id) -> None:
        if agent_id not in state.trajectories:
            pid = state.episode.policy_for(agent_id)
            if pid not in self.policy_map:
                from tfrl import errors

                raise errors.InvalidConfigError(
                    f"env {self.env_name!r}: policy_mapping_fn mapped agent {agent_id!r} to "
                    f"unknown policy {pid!r}; known policies: {list(self.policy_map)}")
            self.seen_agent_ids.setdefault(agent_id, None)
            state.trajectories[agent_id] = Trajectory(state.episode, agent_id, pid, 0)
            state.states[agent_id] = list(self._initial_states[pid])

    # --- sampling -------------------------------------------------------------------------
    def sample(self, explore: bool = True, timestep: Optional[int] = None) -> MultiAgentBatch:
        """Steps the envs for one fragment and returns the postprocessed MultiAgentBatch."""
        fragment = self.settings.rollout_fragment_length
        complete = self.settings.complete_episodes
        finished: List[tuple] = []  # (episode-group of trajectories)
        first_env_step = self.env_steps_sampled
        collected = 0
        steps = 0
        while (collected < fragment) if complete else (steps < fragment):
            ended = self._step(explore, timestep)
            steps += 1
            finished.extend(ended)
            if complete:
                collected += sum(group[0].episode.length for group in ended if group)
        env_steps = self.env_steps_sampled - first_env_step
        if not complete:
            for state in self._states.values():
                group = []
                for agent_id, traj in list(state.trajectories.items()):
                    if len(traj):
                        group.append(traj)
                        state.trajectories[agent_id] = Trajectory(
                            traj.episode, agent_id, traj.policy_id, traj.start_t + len(traj))
                if group:
                    finished.append(group)
        else:
            env_steps = collected
        return self._postprocess(finished, env_steps)

    def _step(self, explore, timestep) -> List[list]:
        self.perf.start_step()
        ended = self._step_envs(explore, timestep)
        self.perf.end_step()
        return ended

    def _step_envs(self, explore, timestep) -> List[list]:
        action_dicts = [dict() for _ in self.envs]
        self._compute_actions(explore, timestep, action_dicts)
        ended = []
        for i, env in enumerate(self.envs):
            started = time.perf_counter()
            obs, rewards, terminateds, truncateds, infos = guard_env_call(
                self.env_name, "step()", env.step, action_dicts[i])
            self.perf.add_env_wait(time.perf_counter() - started)
            group = self._observe(i, obs, rewards, terminateds, truncateds, infos)
            if group is not None:
                ended.append(group)
                self._reset(i)
        return ended

    def _compute_actions(self, explore, timestep, action_dicts) -> None:
        """Every agent due to act (in a state's `obs`) gets its action, into
        `action_dicts[env index][agent id]`, with its row pending until its next observation."""
        perf = self.perf
        requests = defaultdict(list)  # pid -> [(env index, agent id)]
        for i, state in self._states.items():
            for agent_id in state.obs:
                requests[state.episode.policy_for(agent_id)].append((i, agent_id))
        for pid, pairs in requests.items():
            policy = self.policy_map[pid]
            obs = stack_rows([self._states[i].obs[a] for i, a in pairs])
            n_states = len(self._initial_states[pid])
            state_in = [stack_rows([self._states[i].states[a][k] for i, a in pairs])
                        for k in range(n_states)]
            prev = {}
            if getattr(policy, "reads_prev_action_reward", False):
                zero = row_of(zero_rows(policy.action_space, 1), 0)
                prev = dict(
                    prev_action_batch=stack_rows([self._states[i].prev_actions.get(a, zero)
                                                  for i, a in pairs]),
                    prev_reward_batch=np.array([self._states[i].prev_rewards.get(a, 0.0)
                                                for i, a in pairs], np.float32))
            started = time.perf_counter()
            actions, state_out, extra = batched_policy_outputs(*policy.compute_actions(
                obs, state_batches=state_in or None, explore=explore, timestep=timestep,
                **prev))
            actions, extra = self._taken_actions(policy, pairs, obs, actions, extra)
            perf.add_inference(time.perf_counter() - started)
            adapter = self.adapters[pid]
            env_actions = adapter(actions)
            for j, (i, a) in enumerate(pairs):
                state = self._states[i]
                action_dicts[i][a] = adapter.env_action(env_actions, j)
                row = {SampleBatch.OBS: state.obs[a], SampleBatch.ACTIONS: row_of(actions, j),
                       SampleBatch.REWARDS: 0.0}
                for key, value in extra.items():
                    row[key] = value[j]
                if prev:
                    row[SampleBatch.PREV_ACTIONS] = row_of(prev["prev_action_batch"], j)
                    row[SampleBatch.PREV_REWARDS] = prev["prev_reward_batch"][j]
                    state.prev_actions[a] = row[SampleBatch.ACTIONS]
                for k in range(n_states):
                    row[SampleBatch.state_in(k)] = state_in[k][j]
                    row[SampleBatch.state_out(k)] = state_out[k][j]
                    state.states[a][k] = state_out[k][j]
                state.pending[a] = row
                state.episode.record_action(a, row[SampleBatch.ACTIONS])

    def _taken_actions(self, policy, pairs, obs, actions, extra) -> tuple:
        """The actions the agents of `pairs` take and their extra outputs: the policy's
        (a BaseEnv's off-policy actions replace them in base_env_sampler.py)."""
        return actions, extra

    def _observe(self, i, obs, rewards, terminateds, truncateds, infos) -> Optional[list]:
        """Records env `i`'s step result (tfrl's five dicts); returns the trajectories of its
        episode when the step ended it (the caller then starts the next one), else None."""
        perf = self.perf
        state = self._states[i]
        self.env_steps_sampled += 1
        episode = state.episode
        obs = observed(self, obs, episode)
        episode.length += 1
        for agent_id, r in rewards.items():
            r = float(r)
            episode.total_reward += r
            episode.agent_rewards[(agent_id, episode.policy_for(agent_id))] += r
            if agent_id in state.pending:
                state.pending[agent_id][SampleBatch.REWARDS] += r
        for agent_id, info in infos.items():
            episode.record_info(agent_id, info)
        filtered = self._filter_obs(state, obs, "after step()")
        all_terminated = bool(terminateds.get(ALL_AGENTS, False))
        all_truncated = bool(truncateds.get(ALL_AGENTS, False))
        for agent_id in obs:
            self._ensure_agent(state, agent_id)
        for agent_id, row in list(state.pending.items()):
            term = bool(terminateds.get(agent_id, False)) or all_terminated
            trunc = (bool(truncateds.get(agent_id, False)) or all_truncated) and not term
            if agent_id not in filtered and not (term or trunc):
                continue  # the agent waits for its next observation
            row[SampleBatch.NEXT_OBS] = filtered.get(agent_id, row[SampleBatch.OBS])
            row[SampleBatch.TERMINATEDS] = term
            row[SampleBatch.TRUNCATEDS] = trunc
            row[SampleBatch.REWARDS] = np.float32(clip_rewards(
                np.float32(row[SampleBatch.REWARDS]), self.settings.clip_rewards))
            state.prev_rewards[agent_id] = row[SampleBatch.REWARDS]
            cols = state.trajectories[agent_id].columns
            for key, value in row.items():
                cols[key].append(value)
            del state.pending[agent_id]
            if term or trunc:
                state.done_agents.add(agent_id)
        state.obs = {a: o for a, o in filtered.items() if a not in state.done_agents}
        if all_terminated or all_truncated:
            self.callbacks.on_episode_end(worker=self.worker, base_env=self.envs,
                                          policies=self.policy_map, episode=episode,
                                          env_index=i)
            self._finished_metrics.append(RolloutMetrics.of_episode(
                episode, self.worker.worker_index, perf.get()))
            return [t for t in state.trajectories.values() if len(t)]
        self.callbacks.on_episode_step(worker=self.worker, base_env=self.envs,
                                       episode=episode, env_index=i)
        return None

    def _postprocess(self, groups: List[list], env_steps: int) -> MultiAgentBatch:
        started = time.perf_counter()
        batch = self._postprocess_groups(groups, env_steps)
        self.perf.add_processing(time.perf_counter() - started)
        return batch

    def _postprocess_groups(self, groups: List[list], env_steps: int) -> MultiAgentBatch:
        unroll_id = next_unroll_id()
        per_policy = defaultdict(list)
        for group in groups:
            raws = {t.agent_id: (t.policy_id, t.build(
                self._agent_indices.setdefault(t.agent_id, len(self._agent_indices)), unroll_id))
                for t in group}
            for traj in group:
                pid, raw = raws[traj.agent_id]
                policy = self.policy_map[pid]
                # classic RLlib's other_agent_batches: agent id -> (policy, raw batch)
                others = {a: (self.policy_map[p], b) for a, (p, b) in raws.items()
                          if a != traj.agent_id}
                batch = policy.postprocess_trajectory(raw, others, traj.episode)
                self.callbacks.on_postprocess_trajectory(
                    worker=self.worker, episode=traj.episode, agent_id=traj.agent_id,
                    policy_id=pid, policies=self.policy_map, postprocessed_batch=batch,
                    original_batches=raws)
                per_policy[pid].append(batch)
        return MultiAgentBatch({pid: concat_samples(b) for pid, b in per_policy.items()},
                               env_steps)
