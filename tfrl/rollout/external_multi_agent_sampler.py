"""ExternalMultiAgentEnvRunner: the env runner of a worker whose env is an ExternalMultiAgentEnv.

The multi-agent counterpart of `ExternalEnvRunner` (external_sampler.py): it waits for the
events the env queues (tfrl/env/external_multi_agent_env.py), in the application's order, and
keeps one row per agent and step as `MultiAgentEnvRunner` (multi_agent_sampler.py) does. Each
observation dict is one env step of its episode; an agent's row is complete when that agent's
next observation arrives (in a later dict, or at the episode's end: an agent missing from the
final dict ends with its last observation), carrying the agent's rewards logged in between. Each
agent acts through the policy `policy_mapping_fn` gives it (fixed for the episode); every
observation waiting for an action when the queue runs dry gets it from one batched
`compute_actions` call per policy, and a `get_action` is answered once all of its agents have
their actions.

`sample()` returns a MultiAgentBatch keyed by policy id once `rollout_fragment_length` env steps
are ready (truncate_episodes: counted as they arrive, running episodes cut there;
complete_episodes: whole episodes only), each agent's piece postprocessed with the other agents'
pieces of its episode as `other_agent_batches`.
"""
from __future__ import annotations

import time
from collections import defaultdict, deque
from typing import Any, Deque, Dict, List, Optional

import numpy as np

from tfrl import errors
from tfrl.env.external_env import END, OBSERVATION, REWARD
from tfrl.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from tfrl.rollout.episode import Episode
from tfrl.rollout.external_sampler import ExternalRunnerBase
from tfrl.rollout.metrics import RolloutMetrics
from tfrl.rollout.multi_agent_sampler import observed
from tfrl.rollout.trajectory import (Trajectory, batched_policy_outputs, clip_rewards,
                                     next_unroll_id, take_logged_actions)
from tfrl.utils.rows import row_of, stack_rows


class _Agent:
    __slots__ = ("agent_id", "policy_id", "trajectory", "pending", "reward", "states")

    def __init__(self, agent_id, policy_id: str, trajectory: Trajectory, states: list):
        self.agent_id = agent_id
        self.policy_id = policy_id
        self.trajectory = trajectory
        self.pending: Optional[dict] = None  # the row waiting for this agent's next observation
        self.reward = 0.0                    # rewards logged since the pending row's action
        self.states = states


class _RunningEpisode:
    __slots__ = ("episode", "slot", "training", "agents", "unacted")

    def __init__(self, episode: Episode, slot: int, training: bool):
        self.episode = episode
        self.slot = slot
        self.training = training
        self.agents: Dict[Any, _Agent] = {}
        self.unacted = 0  # rows waiting for the next batched policy call


class _DictReply:
    """Collects the actions of one `get_action`'s agents; answers it when all are known."""

    __slots__ = ("reply", "actions", "remaining")

    def __init__(self, reply, agents: int):
        self.reply = reply
        self.actions: Dict[Any, Any] = {}
        self.remaining = agents

    def set(self, agent_id, action) -> None:
        self.actions[agent_id] = action
        self.remaining -= 1
        if self.remaining == 0:
            self.reply.set(self.actions)


class _Book:
    """What a runner keeps between events (see `ExternalEnvRunner`'s), per agent."""

    def __init__(self):
        self.episodes: Dict[str, _RunningEpisode] = {}
        # policy id -> rows whose action is not computed yet:
        # (episode, agent, row, _DictReply or None, logged action or None)
        self.awaiting: Dict[str, List[tuple]] = defaultdict(list)
        self.finished: List[tuple] = []  # (trajectories, env slot) of each ended episode
        self.finished_steps = 0         # env steps of those episodes
        self.steps = 0                  # env steps of training episodes since the last fragment
        self.free_slots: List[int] = []
        self.next_slot = 0
        self.leftover: Deque[tuple] = deque()


class ExternalMultiAgentEnvRunner(ExternalRunnerBase):
    """Samples one ExternalMultiAgentEnv with a map of policies. Arguments as
    `MultiAgentEnvRunner`'s, with `env` the ExternalMultiAgentEnv (its thread is started here)."""

    def __init__(self, worker, env, env_name: str, policy_map, policy_mapping_fn, filters,
                 callbacks, settings, adapters, observation_fn=None):
        super().__init__(worker, env, env_name, callbacks, settings, _Book())
        self.policy_map = policy_map
        self.observation_fn = observation_fn
        self.policy_mapping_fn = policy_mapping_fn
        self.filters = filters
        self.adapters = adapters
        self._initial_states = {pid: [np.asarray(s) for s in (p.get_initial_state() or [])]
                                for pid, p in policy_map.items()}
        self._recurrent = any(self._initial_states.values())
        self.agent_indices: Dict[Any, int] = {}
        env.bind_policy(None, worker.config)
        env.start_thread()

    def set_filters(self, filters: Dict[str, Any]) -> None:
        self.filters = filters

    def adopt(self, old: "ExternalMultiAgentEnvRunner") -> None:
        """Carries the running episodes of the runner this one replaces (a policy swap)."""
        self.book = old.book
        self.agent_indices = old.agent_indices

    # --- sampling -------------------------------------------------------------------------------
    def sample(self, explore: bool = True, timestep: Optional[int] = None) -> MultiAgentBatch:
        """Handles the env's events until a fragment is ready; returns it, keyed by policy id.

        Raises:
          EnvCrashError: the env's `run()` raised.
          ExternalEnvError: the env was closed while sampling.
          InvalidConfigError: `policy_mapping_fn` named a policy the worker does not have.
        """
        complete = self.settings.complete_episodes
        self._handle_until_fragment(lambda: self._ready_steps(complete), explore, timestep)
        book = self.book
        groups, book.finished = book.finished, []
        if complete:
            env_steps, book.finished_steps = book.finished_steps, 0
        else:
            env_steps, book.steps = book.steps, 0
            for running in book.episodes.values():
                group = []
                for agent in running.agents.values():
                    trajectory = agent.trajectory
                    if len(trajectory):
                        group.append(trajectory)
                        agent.trajectory = Trajectory(trajectory.episode, agent.agent_id,
                                                      agent.policy_id,
                                                      trajectory.start_t + len(trajectory))
                if group:
                    groups.append((group, running.slot))
        started = time.perf_counter()
        batch = self._postprocess(groups, env_steps)
        self.perf.add_processing(time.perf_counter() - started)
        return batch

    def _ready_steps(self, complete: bool) -> int:
        return self.book.finished_steps if complete else self.book.steps

    def _handle(self, event: tuple, explore: bool, timestep: Optional[int]) -> None:
        running = self._running_episode(event)
        if running is None:
            return
        kind, episode_id = event[0], event[1]
        episode = running.episode
        if kind == REWARD:
            rewards, infos = event[2], event[3]
            for agent_id, reward in rewards.items():
                episode.total_reward += reward
                episode.agent_rewards[(agent_id, episode.policy_for(agent_id))] += reward
                agent = running.agents.get(agent_id)
                if agent is not None and agent.pending is not None:
                    agent.reward += reward
            for agent_id, info in (infos or {}).items():
                episode.record_info(agent_id, info)
            return
        if running.unacted and (kind == END or self._recurrent):
            # an episode's end, or a recurrent policy's next step, needs the actions before it
            self._act(explore, timestep)
        observations = self._filter(running, observed(self, event[2], episode))
        if kind == OBSERVATION:
            reply, logged = event[3], event[4]
            collector = _DictReply(reply, len(observations)) if reply is not None else None
            for agent_id, observation in observations.items():
                agent = self._agent(running, agent_id)
                self._complete_pending(running, agent, observation, False, False)
                agent.pending = row = {SampleBatch.OBS: observation}
                running.unacted += 1
                self.book.awaiting[agent.policy_id].append(
                    (running, agent, row, collector, None if logged is None else logged[agent_id]))
            episode.length += 1
            if running.training:
                self.book.steps += 1
            self.callbacks.on_episode_step(worker=self.worker, base_env=self.envs,
                                           episode=episode, env_index=running.slot)
        elif kind == END:
            truncated = event[3]
            for agent in running.agents.values():
                if agent.pending is not None:
                    final = observations.get(agent.agent_id, agent.pending[SampleBatch.OBS])
                    self._complete_pending(running, agent, final, not truncated, truncated)
            self._end(episode_id, running)

    def _agent(self, running: _RunningEpisode, agent_id) -> _Agent:
        agent = running.agents.get(agent_id)
        if agent is None:
            policy_id = running.episode.policy_for(agent_id)
            if policy_id not in self.policy_map:
                raise errors.InvalidConfigError(
                    f"env {self.env_name!r}: policy_mapping_fn mapped agent {agent_id!r} to "
                    f"unknown policy {policy_id!r}; known policies: {list(self.policy_map)}")
            agent = running.agents[agent_id] = _Agent(
                agent_id, policy_id, Trajectory(running.episode, agent_id, policy_id, 0),
                list(self._initial_states[policy_id]))
        return agent

    def _filter(self, running: _RunningEpisode, observations: dict) -> dict:
        by_policy = defaultdict(list)
        for agent_id in observations:
            by_policy[running.episode.policy_for(agent_id)].append(agent_id)
        out = {}
        for policy_id, agents in by_policy.items():
            if policy_id not in self.filters:
                self._agent(running, agents[0])  # raises the named error
            filtered = self.filters[policy_id](stack_rows([observations[a] for a in agents]))
            for j, agent_id in enumerate(agents):
                out[agent_id] = row_of(filtered, j)
        return out

    def _start(self, episode_id: str, training: bool) -> _RunningEpisode:
        slot = self.book.free_slots.pop() if self.book.free_slots else self.book.next_slot
        self.book.next_slot = max(self.book.next_slot, slot + 1)
        episode = Episode(slot, policy_mapping_fn=self.policy_mapping_fn)
        running = self.book.episodes[episode_id] = _RunningEpisode(episode, slot, training)
        self.callbacks.on_episode_start(worker=self.worker, base_env=self.envs,
                                        policies=self.policy_map, episode=episode,
                                        env_index=slot)
        return running

    def _complete_pending(self, running: _RunningEpisode, agent: _Agent, next_obs: Any,
                          terminated: bool, truncated: bool) -> None:
        row, agent.pending = agent.pending, None
        if row is None:
            return
        row[SampleBatch.NEXT_OBS] = next_obs
        row[SampleBatch.REWARDS] = np.float32(clip_rewards(np.float32(agent.reward),
                                                           self.settings.clip_rewards))
        row[SampleBatch.TERMINATEDS] = terminated
        row[SampleBatch.TRUNCATEDS] = truncated
        agent.reward = 0.0
        if running.training and SampleBatch.ACTIONS in row:
            _record(agent, row)
        # otherwise _act records it once its action is known

    def _end(self, episode_id: str, running: _RunningEpisode) -> None:
        del self.book.episodes[episode_id]
        self.book.free_slots.append(running.slot)
        episode = running.episode
        group = [agent.trajectory for agent in running.agents.values() if len(agent.trajectory)]
        if running.training:
            self.book.finished_steps += episode.length
        if group:
            self.book.finished.append((group, running.slot))
        self.callbacks.on_episode_end(worker=self.worker, base_env=self.envs,
                                      policies=self.policy_map, episode=episode,
                                      env_index=running.slot)
        self._finished_metrics.append(RolloutMetrics.of_episode(
            episode, self.worker.worker_index, self.perf.get()))

    def _act(self, explore: bool, timestep: Optional[int]) -> None:
        """One batched policy call per policy for every observation awaiting its action."""
        awaiting, self.book.awaiting = self.book.awaiting, defaultdict(list)
        for policy_id, waiting in awaiting.items():
            self._act_with(policy_id, waiting, explore, timestep)

    def _act_with(self, policy_id: str, waiting: List[tuple], explore: bool,
                  timestep: Optional[int]) -> None:
        policy = self.policy_map[policy_id]
        obs = stack_rows([entry[2][SampleBatch.OBS] for entry in waiting])
        state_in = [stack_rows([entry[1].states[k] for entry in waiting])
                    for k in range(len(self._initial_states[policy_id]))]
        started = time.perf_counter()
        actions, state_out, extra = batched_policy_outputs(*policy.compute_actions(
            obs, state_batches=state_in or None, explore=explore, timestep=timestep))
        logged = [j for j, entry in enumerate(waiting) if entry[4] is not None]
        if logged:
            actions, extra = take_logged_actions(policy, [entry[4] for entry in waiting], logged,
                                                 obs, actions, extra)
        self.perf.add_inference(time.perf_counter() - started)
        adapter = self.adapters[policy_id]
        env_actions = adapter(actions)
        self.env_steps_sampled += len(waiting)
        for j, (running, agent, row, collector, _) in enumerate(waiting):
            row[SampleBatch.ACTIONS] = row_of(actions, j)
            for key, value in extra.items():
                row[key] = row_of(value, j)
            for k in range(len(state_in)):
                row[SampleBatch.state_in(k)] = state_in[k][j]
                row[SampleBatch.state_out(k)] = row_of(state_out[k], j)
                agent.states[k] = row_of(state_out[k], j)
            running.unacted -= 1
            running.episode.record_action(agent.agent_id, row[SampleBatch.ACTIONS])
            if SampleBatch.NEXT_OBS in row and running.training:
                _record(agent, row)
            if collector is not None:
                collector.set(agent.agent_id, adapter.env_action(env_actions, j))

    def _postprocess(self, groups: List[tuple], env_steps: int) -> MultiAgentBatch:
        unroll_id = next_unroll_id()
        per_policy = defaultdict(list)
        for group, slot in groups:
            raws = {}
            for trajectory in group:
                index = self.agent_indices.setdefault(trajectory.agent_id,
                                                       len(self.agent_indices))
                raw = trajectory.build(index, unroll_id)
                raw[SampleBatch.ENV_ID] = np.full(raw.count, slot, np.int64)
                raws[trajectory.agent_id] = (trajectory.policy_id, raw)
            for trajectory in group:
                policy_id, raw = raws[trajectory.agent_id]
                # classic RLlib's other_agent_batches: agent id -> (policy, raw batch)
                others = {a: (self.policy_map[p], b) for a, (p, b) in raws.items()
                          if a != trajectory.agent_id}
                batch = self.policy_map[policy_id].postprocess_trajectory(raw, others,
                                                                          trajectory.episode)
                self.callbacks.on_postprocess_trajectory(
                    worker=self.worker, episode=trajectory.episode, agent_id=trajectory.agent_id,
                    policy_id=policy_id, policies=self.policy_map, postprocessed_batch=batch,
                    original_batches=raws)
                per_policy[policy_id].append(batch)
        return MultiAgentBatch({pid: concat_samples(b) for pid, b in per_policy.items()},
                               env_steps)


def _record(agent: _Agent, row: dict) -> None:
    columns = agent.trajectory.columns
    for key, value in row.items():
        columns[key].append(value)
