"""Env runners: the sampling loops of a rollout worker (single-agent and multi-agent).

A runner steps a list of plain gymnasium envs itself rather than a gymnasium vector env: the
step that ends an episode returns its real final observation (no autoreset bookkeeping), and
for CartPole-sized envs a Python loop over envs costs no more than a vector env. Each step makes
one batched `policy.compute_actions` call for all envs (one per policy in multi-agent), so the
inference cost is shared.

Rows are buffered per env (multi-agent: per env and agent) and cut into one piece per episode
segment. Each piece goes through the policy's `postprocess_trajectory` (advantages, n-step), then
the `on_postprocess_trajectory` callback. A piece ends with `terminateds`, with `truncateds`
(time limit), or, in batch_mode "truncate_episodes", with neither when the fragment was cut in
the middle of an episode: the postprocessor then bootstraps from the value of its last
`new_obs`. Gymnasium semantics are kept: terminated and truncated are recorded separately.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import numpy as np
import tree

from tfrl.env.checks import check_observations_finite
from tfrl.rollout.episode import Episode
from tfrl.rollout.metrics import RolloutMetrics, SamplerPerfStats
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.trajectory import (Trajectory, clip_rewards, guard_env_call, next_unroll_id,
                                    row_of, stack_rows)


class EnvRunner:
    """Samples single-agent gymnasium envs with one policy.

    Args:
      worker: the owning RolloutWorker (passed to callbacks).
      envs: the worker's gymnasium envs; env_name: used in error messages.
      policy / policy_id: the acting policy.
      obs_filter: the worker's observation filter for this policy.
      callbacks: a DefaultCallbacks object.
      env_seeds: per-env seeds for the first reset (None: unseeded).
      settings: the worker's WorkerSettings (rollout_fragment_length, batch_mode,
        clip_rewards, check_observations).
      action_adapter: an ActionAdapter for the env's action space.
    """

    def __init__(self, worker, envs: list, env_name: str, policy, policy_id: str, obs_filter,
                 callbacks, env_seeds: Optional[List[Optional[int]]], settings,
                 action_adapter):
        self.worker = worker
        self.envs = envs
        self.env_name = env_name
        self.policy = policy
        self.policy_id = policy_id
        self.obs_filter = obs_filter
        self.callbacks = callbacks
        self.settings = settings
        self.adapter = action_adapter
        self.num_envs = len(envs)
        self.check_obs = settings.check_observations
        self._initial_state = [np.asarray(s) for s in (policy.get_initial_state() or [])]
        self._episodes: List[Optional[Episode]] = [None] * self.num_envs
        self._trajectories: List[Optional[Trajectory]] = [None] * self.num_envs
        self._states: List[list] = [list(self._initial_state) for _ in envs]
        self._finished_metrics: List[RolloutMetrics] = []
        self.env_steps_sampled = 0
        self.perf = SamplerPerfStats()
        raw = [self._reset_env(i, seed) for i, seed in enumerate(env_seeds or [None] * len(envs))]
        self._obs = self._filter(stack_rows(raw), "after reset")
        for i in range(self.num_envs):
            self._start_episode(i)

    # --- env plumbing ---------------------------------------------------------------------
    def _reset_env(self, i: int, seed: Optional[int] = None):
        obs, _info = guard_env_call(self.env_name, "reset()", self.envs[i].reset, seed=seed)
        return obs

    def _filter(self, raw_batch, where: str):
        if self.check_obs:
            check_observations_finite(raw_batch, self.env_name, where)
        return self.obs_filter(raw_batch)

    def _start_episode(self, i: int) -> None:
        episode = Episode(i, policy_mapping_fn=lambda _agent: self.policy_id)
        self._episodes[i] = episode
        self._trajectories[i] = Trajectory(episode, 0, self.policy_id, 0)
        self._states[i] = list(self._initial_state)
        self.callbacks.on_episode_start(worker=self.worker, base_env=self.envs,
                                        policies=self.worker.policy_map, episode=episode,
                                        env_index=i)

    def set_filters(self, filters: Dict[str, Any]) -> None:
        self.obs_filter = filters[self.policy_id]

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self._finished_metrics = self._finished_metrics, []
        return out

    # --- sampling -------------------------------------------------------------------------
    def sample(self, explore: bool = True, timestep: Optional[int] = None) -> SampleBatch:
        """Steps the envs and returns the postprocessed rows of one fragment (a SampleBatch).

        truncate_episodes: exactly rollout_fragment_length steps per env. complete_episodes:
        at least rollout_fragment_length rows, whole episodes only.

        Raises:
          EnvCrashError, InvalidObservationError, ActionOutOfSpaceError: see tfrl.errors.
        """
        fragment = self.settings.rollout_fragment_length
        complete = self.settings.complete_episodes
        finished: List[Trajectory] = []
        collected = 0
        steps = 0
        while (collected < fragment) if complete else (steps < fragment):
            done_now = self._step(explore, timestep)
            steps += 1
            finished.extend(done_now)
            if complete:
                collected += sum(len(t) for t in done_now)
        if not complete:
            # cut every running episode here; its next fragment continues the same eps_id
            for i, traj in enumerate(self._trajectories):
                if len(traj):
                    finished.append(traj)
                    self._trajectories[i] = Trajectory(traj.episode, 0, self.policy_id,
                                                        traj.start_t + len(traj))
        return self._postprocess(finished)

    def _step(self, explore: bool, timestep: Optional[int]) -> List[Trajectory]:
        perf = self.perf
        perf.start_step()
        finished = self._step_envs(explore, timestep)
        perf.end_step()
        return finished

    def _step_envs(self, explore: bool, timestep: Optional[int]) -> List[Trajectory]:
        policy = self.policy
        perf = self.perf
        states = [stack_rows([s[k] for s in self._states]) for k in range(len(self._initial_state))]
        started = time.perf_counter()
        actions, state_outs, extra = policy.compute_actions(
            self._obs, state_batches=states or None, explore=explore, timestep=timestep)
        inferred = time.perf_counter()
        perf.add_inference(inferred - started)
        env_actions = self.adapter(actions)
        env_actions = [self.adapter.env_action(env_actions, i) for i in range(self.num_envs)]
        started = time.perf_counter()
        results = [guard_env_call(self.env_name, "step()", env.step, env_actions[i])
                   for i, env in enumerate(self.envs)]
        perf.add_env_wait(time.perf_counter() - started)
        raw_next = stack_rows([r[0] for r in results])
        rewards = np.asarray([r[1] for r in results], np.float32)
        terminateds = np.asarray([r[2] for r in results], bool)
        truncateds = np.asarray([r[3] for r in results], bool)
        next_obs = self._filter(raw_next, "after step()")
        train_rewards = clip_rewards(rewards, self.settings.clip_rewards)
        self.env_steps_sampled += self.num_envs
        obs = self._obs
        finished = []
        reset_indices = []
        for i in range(self.num_envs):
            traj = self._trajectories[i]
            cols = traj.columns
            cols[SampleBatch.OBS].append(row_of(obs, i))
            cols[SampleBatch.ACTIONS].append(row_of(actions, i))
            cols[SampleBatch.REWARDS].append(train_rewards[i])
            cols[SampleBatch.NEXT_OBS].append(row_of(next_obs, i))
            cols[SampleBatch.TERMINATEDS].append(terminateds[i])
            cols[SampleBatch.TRUNCATEDS].append(truncateds[i])
            for key, value in extra.items():
                cols[key].append(value[i])
            for k, s in enumerate(states):
                cols[SampleBatch.state_in(k)].append(s[i])
                cols[SampleBatch.state_out(k)].append(state_outs[k][i])
            episode = self._episodes[i]
            episode.length += 1
            episode.total_reward += float(rewards[i])
            episode.agent_rewards[(0, self.policy_id)] += float(rewards[i])
            episode.record_info(0, results[i][4])
            episode.record_action(0, actions[i] if isinstance(actions, np.ndarray) else None)
            if terminateds[i] or truncateds[i]:
                finished.append(traj)
                self._end_episode(i)
                reset_indices.append(i)
            else:
                if states:
                    self._states[i] = [s[i] for s in state_outs]
                self.callbacks.on_episode_step(worker=self.worker, base_env=self.envs,
                                               episode=episode, env_index=i)
        if reset_indices:
            started = time.perf_counter()
            raw = stack_rows([self._reset_env(i) for i in reset_indices])
            perf.add_env_wait(time.perf_counter() - started)
            reset_obs = self._filter(raw, "after reset()")
            next_obs = tree.map_structure(np.array, next_obs)  # the rows above keep the old views
            for j, i in enumerate(reset_indices):
                if isinstance(next_obs, np.ndarray):
                    next_obs[i] = reset_obs[j]
                else:
                    tree.map_structure(lambda dst, src: dst.__setitem__(i, src[j]), next_obs,
                                       reset_obs)
                self._start_episode(i)
        self._obs = next_obs
        return finished

    def _end_episode(self, i: int) -> None:
        episode = self._episodes[i]
        self.callbacks.on_episode_end(worker=self.worker, base_env=self.envs,
                                      policies=self.worker.policy_map, episode=episode,
                                      env_index=i)
        self._finished_metrics.append(RolloutMetrics(
            episode.length, episode.total_reward, dict(episode.agent_rewards),
            dict(episode.custom_metrics), dict(episode.hist_data), self.worker.worker_index,
            self.perf.get()))

    def _postprocess(self, trajectories: List[Trajectory]) -> SampleBatch:
        started = time.perf_counter()
        batch = self._postprocess_pieces(trajectories)
        self.perf.add_processing(time.perf_counter() - started)
        return batch

    def _postprocess_pieces(self, trajectories: List[Trajectory]) -> SampleBatch:
        from tfrl.policy.sample_batch import concat_samples

        unroll_id = next_unroll_id()
        pieces = []
        for traj in trajectories:
            raw = traj.build(0, unroll_id)
            batch = self.policy.postprocess_trajectory(raw, None, traj.episode)
            self.callbacks.on_postprocess_trajectory(
                worker=self.worker, episode=traj.episode, agent_id=0, policy_id=self.policy_id,
                policies=self.worker.policy_map, postprocessed_batch=batch,
                original_batches={0: (self.policy_id, raw)})
            pieces.append(batch)
        return concat_samples(pieces) if pieces else SampleBatch()
