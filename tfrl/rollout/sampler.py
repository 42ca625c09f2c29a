"""Env runners: the sampling loops of a rollout worker (single-agent and multi-agent).

A runner steps a list of plain gymnasium envs itself rather than a gymnasium vector env: the
step that ends an episode returns its real final observation (no autoreset bookkeeping), and
for CartPole-sized envs a Python loop over envs costs no more than a vector env. Each step makes
one batched `policy.compute_actions` call for all envs (one per policy in multi-agent), so the
inference cost is shared. Where the single-agent runner's policy has a numpy copy
(`tfrl.policy.numpy_actor.NumpyActor`: fully connected, categorical or Gaussian, no recurrent
state) and `numpy_actions` is on, a step draws its actions with that copy instead (tens of
microseconds rather than a quarter of a millisecond), and the rows' other policy outputs (value
predictions, distribution inputs, the likelihoods of the actions drawn) come in one batch per
fragment, before postprocessing: from the copy itself where the policy's extra outputs are
TFPolicy's own (`NumpyActor.reproduces_outputs`) and the fragment is small enough for numpy to
be the faster (`trajectory.NUMPY_OUTPUTS_MAX_MULTIPLY_ADDS`), else from one TensorFlow policy
call. The copy reads the policy's weights at the start of every `sample()`.

The single-agent runner keeps the rows of all its envs in columnar numpy buffers (one array per
column of shape [rows, num_envs, ...]) and its episode totals in per-env arrays, so a step does
no per-env Python work except at episode ends (and when a callbacks object implements
`on_episode_step`, which then sees its Episode up to date every step). The multi-agent runner
buffers rows per env and agent. Rows are cut into one piece per episode segment. Each piece goes
through the policy's `postprocess_trajectory` (advantages, n-step), then the
`on_postprocess_trajectory` callback. A piece ends with `terminateds`, with `truncateds` (time
limit), or, in batch_mode "truncate_episodes", with neither when the fragment was cut in the
middle of an episode: the postprocessor then bootstraps from the value of its last `new_obs`.
Gymnasium semantics are kept: terminated and truncated are recorded separately.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import numpy as np
import tree

from tfrl.env.checks import check_observations_finite
from tfrl.policy.numpy_actor import NumpyActor
from tfrl.rollout.callbacks import overrides_hook
from tfrl.rollout.episode import Episode
from tfrl.rollout.metrics import RolloutMetrics, SamplerPerfStats
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.trajectory import (batched_policy_outputs, clip_rewards, guard_env_call,
                                     next_unroll_id, outputs_of_chosen_actions)
from tfrl.utils.rows import stack_rows, zero_rows


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
        # the env's observation space (a classic preprocessed policy's is the flat Box)
        self._obs_space = getattr(policy.observation_space, "original_space", policy.observation_space)
        self.policy_id = policy_id
        self.obs_filter = obs_filter
        self.callbacks = callbacks
        self.settings = settings
        self.adapter = action_adapter
        self.num_envs = n = len(envs)
        self.check_obs = settings.check_observations
        self._step_callback = overrides_hook(callbacks, "on_episode_step")
        self._initial_state = [np.asarray(s) for s in (policy.get_initial_state() or [])]
        self._states: List[np.ndarray] = [np.stack([s] * n) for s in self._initial_state]
        # the rows of all envs, one array per column of shape [rows, num_envs, ...]
        self._columns: Optional[Dict[str, Any]] = None
        self._rows = 0
        # per env: the buffer row where its current episode segment starts, and that row's t
        self._segment_start = np.zeros(n, np.int64)
        self._segment_t = np.zeros(n, np.int64)
        # per env: episode totals, copied into its Episode whenever a hook or the metrics read it
        self._lengths = np.zeros(n, np.int64)
        self._returns = np.zeros(n, np.float64)
        self._last_infos: Optional[tuple] = None
        self._last_actions: Any = None
        # for a policy that reads them: each env's previous action and reward (zeros at an
        # episode's first step), given to the policy and recorded in the rows
        self._reads_prev = getattr(policy, "reads_prev_action_reward", False)
        self._prev_actions = zero_rows(policy.action_space, n) if self._reads_prev else None
        self._prev_rewards = np.zeros(n, np.float32)
        self._episodes: List[Optional[Episode]] = [None] * n
        self._finished_segments: List[tuple] = []
        self._finished_metrics: List[RolloutMetrics] = []
        self.env_steps_sampled = 0
        self.perf = SamplerPerfStats()
        self._actor: Optional[NumpyActor] = None
        if (settings.numpy_actions and not self._initial_state
                and not getattr(policy, "acts_in_numpy", False)):
            seed_base = getattr(policy, "_seed_base", None)
            self._actor = NumpyActor.from_policy(
                policy, None if seed_base is None else [seed_base, getattr(worker, "worker_index", 0)])
        # buffer rows [0, this) hold the policy's extra outputs (numpy actions add them late)
        self._rows_with_outputs = 0
        raw = self._first_observations(env_seeds)
        self._obs = self._latest_obs = self._filter(stack_rows(raw, self._obs_space), "after reset")
        for i in range(n):
            self._start_episode(i)

    # --- env plumbing (vector_env_sampler.py's runner steps a VectorEnv instead) -------------
    def _first_observations(self, env_seeds: Optional[List[Optional[int]]]) -> list:
        return [self._reset_env(i, seed)
                for i, seed in enumerate(env_seeds or [None] * self.num_envs)]

    def _reset_env(self, i: int, seed: Optional[int] = None):
        obs, _info = guard_env_call(self.env_name, "reset()", self.envs[i].reset, seed=seed)
        return obs

    def _step_all(self, env_actions: list) -> list:
        return [env.step(a) for env, a in zip(self.envs, env_actions)]

    def _filter(self, raw_batch, where: str):
        if self.check_obs:
            check_observations_finite(raw_batch, self.env_name, where)
        return self.obs_filter(raw_batch)

    def _start_episode(self, i: int) -> None:
        episode = Episode(i, policy_mapping_fn=lambda _agent: self.policy_id)
        self._episodes[i] = episode
        self._segment_start[i] = self._rows
        self._segment_t[i] = 0
        self._lengths[i] = 0
        self._returns[i] = 0.0
        for k, s in enumerate(self._initial_state):
            self._states[k][i] = s
        self.callbacks.on_episode_start(worker=self.worker, base_env=self.envs,
                                        policies=self.worker.policy_map, episode=episode,
                                        env_index=i)

    def _synced_episode(self, i: int) -> Episode:
        """Env i's Episode with the totals, last info and last action of its latest step."""
        episode = self._episodes[i]
        episode.length = int(self._lengths[i])
        episode.total_reward = float(self._returns[i])
        episode.agent_rewards[(0, self.policy_id)] = float(self._returns[i])
        episode.record_info(0, self._last_infos[i])
        episode.record_observation(0, tree.map_structure(lambda column: column[i],
                                                         self._latest_obs))
        actions = self._last_actions
        if isinstance(actions, np.ndarray):
            episode.record_action(0, actions[i])
        elif isinstance(actions, (dict, tuple)):  # a Dict/Tuple action space's nest of batches
            episode.record_action(0, tree.map_structure(lambda column: column[i], actions))
        else:
            episode.record_action(0, None)
        return episode

    @property
    def uses_numpy_actions(self) -> bool:
        """True when steps draw their actions in numpy (the policy's numpy copy, or a
        NumpyPolicy)."""
        return self._actor is not None or getattr(self.policy, "acts_in_numpy", False)

    def set_filters(self, filters: Dict[str, Any]) -> None:
        self.obs_filter = filters[self.policy_id]

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self._finished_metrics = self._finished_metrics, []
        return out

    # --- column buffers -------------------------------------------------------------------
    def _write(self, key: str, value: Any) -> None:
        row = self._rows
        column = self._columns.get(key)
        if column is None:
            capacity = self._capacity
            column = tree.map_structure(
                lambda v: np.empty((capacity,) + np.shape(v), np.asarray(v).dtype), value)
            self._columns[key] = column
        if isinstance(column, np.ndarray):
            column[row] = value
        else:
            tree.map_structure(lambda c, v: c.__setitem__(row, v), column, value)

    def _reserve_row(self) -> None:
        if self._columns is None:
            self._columns = {}
            self._capacity = max(self.settings.rollout_fragment_length, 1)
        elif self._rows == self._capacity:  # complete_episodes: episodes run past the fragment
            self._capacity *= 2
            self._columns = {k: tree.map_structure(_grown(self._capacity), v)
                             for k, v in self._columns.items()}

    def _keep_rows_from(self, first: int) -> None:
        """Drops the buffer rows before `first` (complete_episodes keeps running episodes)."""
        if self._columns is None:
            return
        self._columns = {k: tree.map_structure(lambda a: a[first:].copy(), v)
                         for k, v in self._columns.items()}
        self._capacity -= first
        self._rows -= first
        self._rows_with_outputs = max(self._rows_with_outputs - first, 0)
        self._segment_start -= first
        if self._capacity == 0:
            self._columns = None

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
        if self._actor is not None:
            self._actor.load_weights(self.policy)
        collected = 0
        steps = 0
        while (collected < fragment) if complete else (steps < fragment):
            collected += self._step(explore, timestep)
            steps += 1
        self._add_policy_outputs(explore, timestep)
        segments, self._finished_segments = self._finished_segments, []
        if complete:
            batch = self._postprocess(segments)
            self._keep_rows_from(int(self._segment_start.min()))
            return batch
        # cut every running episode here; its next fragment continues the same eps_id
        rows = self._rows
        for i in range(self.num_envs):
            start = int(self._segment_start[i])
            if start < rows:
                segments.append((i, start, rows, int(self._segment_t[i]), self._episodes[i]))
        batch = self._postprocess(segments)
        self._segment_t += rows - self._segment_start
        self._segment_start[:] = 0
        self._columns, self._rows, self._rows_with_outputs = None, 0, 0
        return batch

    def _add_policy_outputs(self, explore: bool, timestep: Optional[int]) -> None:
        """With numpy actions: the policy's extra outputs for the buffered rows that lack them, in
        one batch (the copy's, or one TensorFlow call's), with the likelihoods of the actions the
        steps drew."""
        first, rows = self._rows_with_outputs, self._rows
        if self._actor is None or rows == first:
            return
        started = time.perf_counter()
        count = (rows - first) * self.num_envs
        flat = lambda column: column[first:rows].reshape((count,) + column.shape[2:])  # noqa: E731
        obs = tree.map_structure(flat, self._columns[SampleBatch.OBS])
        drawn = flat(self._columns[SampleBatch.ACTIONS])
        _, extra = outputs_of_chosen_actions(self.policy, obs, drawn, explore, timestep,
                                             self._actor)
        for key, value in extra.items():
            column = self._columns.get(key)
            if column is None:
                column = tree.map_structure(
                    lambda v: np.empty((self._capacity, self.num_envs) + np.shape(v)[1:],
                                       np.asarray(v).dtype), value)
                self._columns[key] = column
            tree.map_structure(
                lambda c, v: c.__setitem__(slice(first, rows),
                                           np.reshape(v, (rows - first, self.num_envs) + np.shape(v)[1:])),
                column, value)
        self._rows_with_outputs = rows
        self.perf.add_inference(time.perf_counter() - started)

    def _step(self, explore: bool, timestep: Optional[int]) -> int:
        perf = self.perf
        perf.start_step()
        finished_rows = self._step_envs(explore, timestep)
        perf.end_step()
        return finished_rows

    def _step_envs(self, explore: bool, timestep: Optional[int]) -> int:
        """One step of all envs; returns the number of rows of the episodes it finished."""
        perf = self.perf
        states = self._states
        started = time.perf_counter()
        prev = dict(prev_action_batch=self._prev_actions,
                    prev_reward_batch=self._prev_rewards) if self._reads_prev else {}
        if self._actor is not None:
            actions, state_outs, extra = self._actor.act_batch(self._obs, explore), [], {}
        else:
            actions, state_outs, extra = batched_policy_outputs(*self.policy.compute_actions(
                self._obs, state_batches=states or None, explore=explore, timestep=timestep,
                **prev))
        perf.add_inference(time.perf_counter() - started)
        env_actions = self.adapter(actions)
        if self.adapter.is_discrete and isinstance(env_actions, np.ndarray):
            env_actions = env_actions.astype(np.int64).tolist()
        else:
            env_actions = [self.adapter.env_action(env_actions, i) for i in range(self.num_envs)]
        started = time.perf_counter()
        results = guard_env_call(self.env_name, "step()", self._step_all, env_actions)
        perf.add_env_wait(time.perf_counter() - started)
        raw_next, rewards, terminateds, truncateds, infos = zip(*results)
        raw_next = stack_rows(raw_next, self._obs_space)
        rewards = np.asarray(rewards, np.float32)
        terminateds = np.asarray(terminateds, bool)
        truncateds = np.asarray(truncateds, bool)
        next_obs = self._filter(raw_next, "after step()")
        self.env_steps_sampled += self.num_envs

        self._reserve_row()
        write = self._write
        write(SampleBatch.OBS, self._obs)
        write(SampleBatch.ACTIONS, actions)
        recorded_rewards = clip_rewards(rewards, self.settings.clip_rewards)
        write(SampleBatch.REWARDS, recorded_rewards)
        write(SampleBatch.NEXT_OBS, next_obs)
        write(SampleBatch.TERMINATEDS, terminateds)
        write(SampleBatch.TRUNCATEDS, truncateds)
        for key, value in extra.items():
            write(key, value)
        for k, s in enumerate(states):
            write(SampleBatch.state_in(k), s)
            write(SampleBatch.state_out(k), state_outs[k])
        if self._reads_prev:
            write(SampleBatch.PREV_ACTIONS, self._prev_actions)
            write(SampleBatch.PREV_REWARDS, self._prev_rewards)
            self._prev_actions = tree.map_structure(np.array, actions)
            self._prev_rewards = np.array(recorded_rewards, np.float32)
        self._rows += 1
        self._lengths += 1
        self._returns += rewards
        self._last_infos = infos
        self._last_actions = actions
        if states:
            self._states = [np.array(s) for s in state_outs]

        self._latest_obs = next_obs  # what the episode callbacks see as the last observation
        dones = terminateds | truncateds
        done_indices = np.flatnonzero(dones).tolist()
        finished_rows = 0
        if self._step_callback:
            for i in range(self.num_envs):
                if dones[i]:
                    finished_rows += self._end_episode(i)
                else:
                    self.callbacks.on_episode_step(worker=self.worker, base_env=self.envs,
                                                   episode=self._synced_episode(i), env_index=i)
        else:
            for i in done_indices:
                finished_rows += self._end_episode(i)
        if done_indices:
            started = time.perf_counter()
            raw = stack_rows([self._reset_env(i) for i in done_indices], self._obs_space)
            perf.add_env_wait(time.perf_counter() - started)
            reset_obs = self._filter(raw, "after reset()")
            next_obs = tree.map_structure(np.array, next_obs)  # the filter's array stays as it is
            for j, i in enumerate(done_indices):
                if isinstance(next_obs, np.ndarray):
                    next_obs[i] = reset_obs[j]
                else:
                    tree.map_structure(lambda dst, src: dst.__setitem__(i, src[j]), next_obs,
                                       reset_obs)
                if self._reads_prev:
                    tree.map_structure(lambda column: column.__setitem__(i, 0),
                                       self._prev_actions)
                    self._prev_rewards[i] = 0.0
                self._start_episode(i)
        self._obs = self._latest_obs = next_obs
        return finished_rows

    def _end_episode(self, i: int) -> int:
        """Ends env i's episode; returns the rows of its last segment."""
        episode = self._synced_episode(i)
        start = int(self._segment_start[i])
        self._finished_segments.append((i, start, self._rows, int(self._segment_t[i]), episode))
        self.callbacks.on_episode_end(worker=self.worker, base_env=self.envs,
                                      policies=self.worker.policy_map, episode=episode,
                                      env_index=i)
        self._finished_metrics.append(RolloutMetrics.of_episode(
            episode, self.worker.worker_index, self.perf.get()))
        return self._rows - start

    def _postprocess(self, segments: List[tuple]) -> SampleBatch:
        started = time.perf_counter()
        batch = self._postprocess_pieces(segments)
        self.perf.add_processing(time.perf_counter() - started)
        return batch

    def _segment_batch(self, segment: tuple, unroll_id: int) -> SampleBatch:
        i, start, end, start_t, episode = segment
        n = end - start
        batch = {k: v[start:end, i].copy() if isinstance(v, np.ndarray)
                 else tree.map_structure(lambda a: a[start:end, i].copy(), v)
                 for k, v in self._columns.items()}
        batch[SampleBatch.EPS_ID] = np.full(n, episode.episode_id, np.int64)
        batch[SampleBatch.AGENT_INDEX] = np.zeros(n, np.int64)
        batch[SampleBatch.UNROLL_ID] = np.full(n, unroll_id, np.int64)
        batch[SampleBatch.ENV_ID] = np.full(n, i, np.int64)
        batch[SampleBatch.T] = np.arange(start_t, start_t + n, dtype=np.int64)
        return SampleBatch(batch)

    def _postprocess_pieces(self, segments: List[tuple]) -> SampleBatch:
        from tfrl.policy.sample_batch import concat_samples

        unroll_id = next_unroll_id()
        pieces = []
        for segment in segments:
            episode = segment[4]
            raw = self._segment_batch(segment, unroll_id)
            batch = self.policy.postprocess_trajectory(raw, None, episode)
            self.callbacks.on_postprocess_trajectory(
                worker=self.worker, episode=episode, agent_id=0, policy_id=self.policy_id,
                policies=self.worker.policy_map, postprocessed_batch=batch,
                original_batches={0: (self.policy_id, raw)})
            pieces.append(batch)
        return concat_samples(pieces) if pieces else SampleBatch()


def _grown(capacity: int):
    def grow(a: np.ndarray) -> np.ndarray:
        out = np.empty((capacity,) + a.shape[1:], a.dtype)
        out[:len(a)] = a
        return out
    return grow
