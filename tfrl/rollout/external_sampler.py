"""ExternalEnvRunner: the env runner of a worker whose env is an ExternalEnv.

Where `EnvRunner` (sampler.py) steps gymnasium envs, this runner waits for the events an
ExternalEnv queues (tfrl/env/external_env.py: episode starts, observations, rewards, episode
ends), in the order the application made them, and turns them into the same rows the other
runners record: a row is complete when the episode's next observation (or its end) arrives,
carrying the rewards logged in between. Every observation waiting for an action when the queue
runs dry gets it from one batched `compute_actions` call. Actions the application logged itself
(`log_action`, or `log_actions` for many steps of an episode in one event, turned into rows
column by column) are recorded as taken; the policy's extra outputs for them are computed all the
same (values for GAE) and, where the policy has action likelihoods, their `action_logp` /
`action_prob` are those of the logged action.

`sample()` returns when `rollout_fragment_length` complete rows are ready (truncate_episodes:
running episodes are cut there and bootstrap from their last observation; complete_episodes:
whole episodes only), each episode piece postprocessed as in sampler.py. The multi-agent runner
(external_multi_agent_sampler.py) shares its event loop's constants.
"""
from __future__ import annotations

import queue
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional

import numpy as np
import tree

from tfrl import errors
from tfrl.env.external_env import END, OBSERVATION, REWARD, START, STEPS
from tfrl.policy.sample_batch import SampleBatch, concat_samples
from tfrl.rollout.episode import Episode
from tfrl.rollout.filters import NoFilter
from tfrl.rollout.metrics import RolloutMetrics, SamplerPerfStats
from tfrl.rollout.trajectory import (Trajectory, batched_policy_outputs, clip_rewards,
                                     next_unroll_id, outputs_of_chosen_actions, take_logged_actions)
from tfrl.utils.rows import row_of, stack_rows, zero_rows

# the most events handled between two batched policy calls
MAX_EVENTS_PER_STEP = 1024
# logged rows (nobody waits for their action) gathered before a policy call computes their
# extra outputs, unless the fragment fills first: one call per row would cost more than the rows
LOGGED_ROWS_PER_CALL = 256
# how long a runner waits for an event before it takes the steps the env holds back (a policy
# server's inline answers, sent in blocks) and checks that the env's thread is still alive
POLL_SECONDS = 0.02
# how long a runner lets events gather when none it has is a caller waiting for an action:
# waking once per event of a fast client would cost more than the events
GATHER_SECONDS = 0.002


class _RunningEpisode:
    __slots__ = ("episode", "trajectory", "slot", "states", "pending", "reward", "training",
                 "unacted", "prev_action", "prev_reward")

    def __init__(self, episode: Episode, trajectory: Trajectory, slot: int, states: list,
                 training: bool):
        self.episode = episode
        self.trajectory = trajectory
        self.slot = slot
        self.states = states
        self.pending: Optional[dict] = None  # the row waiting for its next observation
        self.reward = 0.0                    # rewards logged since the pending row's action
        self.training = training
        self.unacted = 0                     # rows waiting for the next batched policy call
        # the episode's last action and reward, for a policy that reads them (zeros at first)
        self.prev_action: Any = None
        self.prev_reward = 0.0


class _Book:
    """What a runner keeps between events: the running episodes, the rows awaiting an action,
    the pieces of ended episodes not yet returned, and the env-id slots of running episodes."""

    def __init__(self):
        self.episodes: Dict[str, _RunningEpisode] = {}
        # rows whose action is not computed yet: (episode, row, ActionReply or None, logged action)
        self.awaiting: List[tuple] = []
        self.replies_awaited = 0                   # rows of `awaiting` a get_action waits for
        self.held_rows = 0                         # complete rows among them
        self.finished: List[tuple] = []            # (trajectory, slot) of ended episodes
        self.finished_rows = 0
        self.free_slots: List[int] = []
        self.next_slot = 0
        self.leftover: Deque[tuple] = deque()      # events taken but not handled yet


class ExternalRunnerBase:
    """What the single- and multi-agent external env runners share: the env's event queue,
    the loop that handles events until a fragment is ready, the start of an event's handling,
    and the finished episodes' metrics. Subclasses set `book` (with `episodes` and
    `leftover`) and define `_handle`, `_start` and `_act`."""

    def __init__(self, worker, env, env_name: str, callbacks, settings, book):
        self.worker = worker
        self.env = env
        self.envs = [env]
        self.env_name = env_name
        self.callbacks = callbacks
        self.settings = settings
        self.book = book
        self._finished_metrics: List[RolloutMetrics] = []
        self.env_steps_sampled = 0
        self.perf = SamplerPerfStats()

    def pop_metrics(self) -> List[RolloutMetrics]:
        out, self._finished_metrics = self._finished_metrics, []
        return out

    def _handle_until_fragment(self, ready: Callable[[], int], explore: bool,
                               timestep: Optional[int]) -> None:
        """Handles the env's events, acting once per batch of them, until `ready()` counts
        `rollout_fragment_length`: exactly one fragment, the events after it wait in the book
        for the next sample().

        Raises:
          EnvCrashError: the env's `run()` raised.
          ExternalEnvError: the env was closed while the worker sampled it.
        """
        fragment = self.settings.rollout_fragment_length
        while ready() < fragment:
            events = self._next_events()
            self.perf.start_step()
            for index, event in enumerate(events):
                if event[0] == STEPS:  # only as many steps as the fragment still has room for
                    event, rest = self._split_steps(event, fragment - ready())
                    if rest is not None:
                        events.insert(index + 1, rest)
                self._handle(event, explore, timestep)
                if event[0] != REWARD and ready() >= fragment:
                    self.book.leftover.extend(events[index + 1:])
                    break
            if ready() >= fragment or self._act_now():
                self._act(explore, timestep)
            self.perf.end_step()

    def _running_episode(self, event: tuple):
        """The running episode an event belongs to (started if the event is its first), or
        None when the event is handled already: a START, or the wake-up a close() sends."""
        kind, episode_id = event[0], event[1]
        if kind == START:
            self._start(episode_id, event[2])
            return None
        if episode_id is None:
            return None
        return self.book.episodes.get(episode_id) or self._start(episode_id, True)

    def _next_events(self) -> List[tuple]:
        """The events to handle next (at most MAX_EVENTS_PER_STEP): those the book kept over
        from a full fragment, else at least one from the env's queue, waiting for it."""
        leftover = self.book.leftover
        if leftover:
            return [leftover.popleft() for _ in range(min(len(leftover), MAX_EVENTS_PER_STEP))]
        env, events = self.env, self.env.events
        while True:
            if env.run_error is not None:
                error = env.run_error
                raise errors.EnvCrashError(
                    f"external env {self.env_name!r} raised {type(error).__name__} in run(): "
                    f"{error}") from error
            if env.closed:
                raise errors.ExternalEnvError(
                    f"external env {self.env_name!r} was closed while the worker sampled it")
            try:
                first = events.get(timeout=POLL_SECONDS)
                break
            except queue.Empty:
                env.flush_buffered_steps()
        out = [first]
        gathered = False
        while len(out) < MAX_EVENTS_PER_STEP:
            try:
                out.append(events.get_nowait())
            except queue.Empty:
                if gathered or any(event[0] == OBSERVATION and event[3] is not None
                                   for event in out):
                    break
                time.sleep(GATHER_SECONDS)
                gathered = True
        return out

    def _start(self, episode_id: str, training: bool):
        raise NotImplementedError

    def _split_steps(self, event: tuple, room: int) -> tuple:
        raise NotImplementedError

    def _act_now(self) -> bool:
        """Whether the rows awaiting their actions get them now, or wait for more to batch."""
        return True

    def _handle(self, event: tuple, explore: bool, timestep: Optional[int]) -> None:
        raise NotImplementedError

    def _act(self, explore: bool, timestep: Optional[int]) -> None:
        raise NotImplementedError


class ExternalEnvRunner(ExternalRunnerBase):
    """Samples one ExternalEnv with one policy. Arguments as `EnvRunner`'s, with `env` the
    ExternalEnv (its thread is started here)."""

    def __init__(self, worker, env, env_name: str, policy, policy_id: str, obs_filter, callbacks,
                 settings, action_adapter):
        super().__init__(worker, env, env_name, callbacks, settings, _Book())
        self.policy = policy
        self.policy_id = policy_id
        self.obs_filter = obs_filter
        self.adapter = action_adapter
        self._initial_state = [np.asarray(s) for s in (policy.get_initial_state() or [])]
        self._reads_prev = getattr(policy, "reads_prev_action_reward", False)
        self._zero_action = row_of(zero_rows(policy.action_space, 1), 0) if self._reads_prev else None
        # each step of an episode needs what the step before it left: its state, its action
        self._sequential = bool(self._initial_state) or self._reads_prev
        env.bind_policy(policy, worker.config, action_adapter)
        env.start_thread()

    def set_filters(self, filters: Dict[str, Any]) -> None:
        self.obs_filter = filters[self.policy_id]

    def adopt(self, old: "ExternalEnvRunner") -> None:
        """Carries the running episodes of the runner this one replaces (a policy swap)."""
        self.book = old.book

    # --- sampling -------------------------------------------------------------------------------
    def sample(self, explore: bool = True, timestep: Optional[int] = None) -> SampleBatch:
        """Handles the env's events until a fragment is ready; returns its postprocessed rows.

        Raises:
          EnvCrashError: the env's `run()` raised.
          ExternalEnvError: the env was closed while sampling.
        """
        complete = self.settings.complete_episodes
        self.env.refresh_policy(explore)
        self._handle_until_fragment(lambda: self._ready_rows(complete), explore, timestep)
        pieces, self.book.finished, self.book.finished_rows = self.book.finished, [], 0
        if not complete:
            for running in self.book.episodes.values():
                trajectory = running.trajectory
                if len(trajectory):
                    pieces.append((trajectory, running.slot))
                    running.trajectory = Trajectory(trajectory.episode, 0, self.policy_id,
                                                    trajectory.start_t + len(trajectory))
        started = time.perf_counter()
        batch = self._postprocess(pieces)
        self.perf.add_processing(time.perf_counter() - started)
        return batch

    def _ready_rows(self, complete: bool) -> int:
        if complete:
            return self.book.finished_rows
        return (self.book.finished_rows + self.book.held_rows
                + sum(len(r.trajectory) for r in self.book.episodes.values()))

    def _handle(self, event: tuple, explore: bool, timestep: Optional[int]) -> None:
        running = self._running_episode(event)
        if running is None:
            return
        kind, episode_id = event[0], event[1]
        if kind == REWARD:
            reward, info = event[2], event[3]
            running.reward += reward
            episode = running.episode
            episode.total_reward += reward
            episode.agent_rewards[(0, self.policy_id)] += reward
            if info is not None:
                episode.record_info(0, info)
            return
        if running.unacted and (kind in (END, STEPS) or self._sequential):
            # an episode's end, logged steps, or the next step of a recurrent policy or of one
            # that reads the previous action, need the actions before them
            self._act(explore, timestep)
        if kind == STEPS:
            self._handle_steps(running, event, explore, timestep)
            return
        observation = self._filter(event[2])
        if kind == OBSERVATION:
            self._complete_pending(running, observation, False, False)
            running.pending = row = {SampleBatch.OBS: observation}
            running.unacted += 1
            self.book.awaiting.append((running, row, event[3], event[4]))
            self.book.replies_awaited += event[3] is not None
        elif kind == END:
            truncated = event[3]
            self._complete_pending(running, observation, not truncated, truncated)
            self._end(episode_id, running)

    def _act_now(self) -> bool:
        """A get_action waits, or enough logged rows (an inline-answered or logged action's)
        gathered."""
        book = self.book
        return book.replies_awaited > 0 or len(book.awaiting) >= LOGGED_ROWS_PER_CALL

    def _split_steps(self, event: tuple, room: int) -> tuple:
        """A STEPS event cut in two where its rows would fill the fragment (`room` rows to go):
        (the head, the rest or None)."""
        count = len(event[4])
        running = self.book.episodes.get(event[1])
        if self.settings.complete_episodes or (running is not None and not running.training):
            return event, None
        # the first step completes the episode's pending row; a new episode has none
        take = room if running is not None and running.pending is not None else room + 1
        if take >= count:
            return event, None

        def part(start, stop):
            cut = slice(start, stop)
            return (STEPS, event[1], tree.map_structure(lambda a: a[cut], event[2]),
                    tree.map_structure(lambda a: a[cut], event[3]), event[4][cut])

        return part(0, take), part(take, count)

    def _handle_steps(self, running: _RunningEpisode, event: tuple, explore: bool,
                      timestep: Optional[int]) -> None:
        """Logged steps of one episode (a STEPS event): the extra outputs of all of them in one
        batch (from the env's inline numpy copy where it reproduces them, else one policy call),
        and their rows added column by column; the last row waits for the next observation as a
        single step's would."""
        observations, logged_actions, rewards = event[2], event[3], event[4]
        count = len(rewards)
        if self._sequential:  # each step needs the state or the action the one before left
            for i in range(count):
                if rewards[i]:
                    self._handle((REWARD, event[1], float(rewards[i]), None), explore, timestep)
                self._handle((OBSERVATION, event[1], row_of(observations, i), None,
                              row_of(logged_actions, i)), explore, timestep)
            return
        obs = self.obs_filter(observations)
        started = time.perf_counter()
        actions, extra = outputs_of_chosen_actions(self.policy, obs, logged_actions, explore,
                                                   timestep, self.env.inline_actor)
        self.perf.add_inference(time.perf_counter() - started)
        episode = running.episode
        total = float(rewards.sum())
        episode.total_reward += total
        episode.agent_rewards[(0, self.policy_id)] += total
        episode.length += count
        episode.record_action(0, row_of(actions, count - 1))
        self.env_steps_sampled += count
        running.reward += float(rewards[0])
        self._complete_pending(running, row_of(obs, 0), False, False)
        step_rewards = rewards[1:]
        if count > 1 and running.reward:
            # rewards before an episode's first step (no step to complete) count for that step,
            # as they do when its steps come one by one
            step_rewards = step_rewards.copy()
            step_rewards[0] += running.reward
            running.reward = 0.0
        columns = dict(extra, **{SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions})
        if running.training and count > 1:
            trajectory = running.trajectory.columns
            for key, value in columns.items():
                trajectory[key].extend(_rows(value, 0, count - 1))
            trajectory[SampleBatch.NEXT_OBS].extend(_rows(obs, 1, count))
            trajectory[SampleBatch.REWARDS].extend(clip_rewards(
                step_rewards.astype(np.float32), self.settings.clip_rewards))
            trajectory[SampleBatch.TERMINATEDS].extend([False] * (count - 1))
            trajectory[SampleBatch.TRUNCATEDS].extend([False] * (count - 1))
        running.pending = {key: row_of(value, count - 1) for key, value in columns.items()}

    def _filter(self, observation: Any) -> Any:
        if type(self.obs_filter) is NoFilter:
            return observation
        return row_of(self.obs_filter(stack_rows([observation])), 0)

    def _start(self, episode_id: str, training: bool) -> _RunningEpisode:
        slot = self.book.free_slots.pop() if self.book.free_slots else self.book.next_slot
        self.book.next_slot = max(self.book.next_slot, slot + 1)
        episode = Episode(slot, policy_mapping_fn=lambda _agent: self.policy_id)
        running = _RunningEpisode(episode, Trajectory(episode, 0, self.policy_id, 0), slot,
                                  list(self._initial_state), training)
        running.prev_action = self._zero_action
        self.book.episodes[episode_id] = running
        self.callbacks.on_episode_start(worker=self.worker, base_env=self.envs,
                                        policies=self.worker.policy_map, episode=episode,
                                        env_index=slot)
        return running

    def _complete_pending(self, running: _RunningEpisode, next_obs: Any, terminated: bool,
                          truncated: bool) -> None:
        row, running.pending = running.pending, None
        if row is None:
            return
        row[SampleBatch.NEXT_OBS] = next_obs
        row[SampleBatch.REWARDS] = np.float32(clip_rewards(np.float32(running.reward),
                                                           self.settings.clip_rewards))
        row[SampleBatch.TERMINATEDS] = terminated
        row[SampleBatch.TRUNCATEDS] = truncated
        running.reward = 0.0
        running.prev_reward = float(row[SampleBatch.REWARDS])
        if not running.training:
            return
        if SampleBatch.ACTIONS in row:
            self._record(running, row)
        else:
            self.book.held_rows += 1  # recorded by _act once its action is known

    @staticmethod
    def _record(running: _RunningEpisode, row: dict) -> None:
        columns = running.trajectory.columns
        for key, value in row.items():
            columns[key].append(value)

    def _end(self, episode_id: str, running: _RunningEpisode) -> None:
        del self.book.episodes[episode_id]
        self.book.free_slots.append(running.slot)
        episode = running.episode
        if len(running.trajectory):
            self.book.finished.append((running.trajectory, running.slot))
            self.book.finished_rows += len(running.trajectory)
        self.callbacks.on_episode_end(worker=self.worker, base_env=self.envs,
                                      policies=self.worker.policy_map, episode=episode,
                                      env_index=running.slot)
        self._finished_metrics.append(RolloutMetrics.of_episode(
            episode, self.worker.worker_index, self.perf.get()))

    def _act(self, explore: bool, timestep: Optional[int]) -> None:
        """One batched policy call for every observation awaiting its action."""
        waiting, self.book.awaiting = self.book.awaiting, []
        self.book.replies_awaited = 0
        if not waiting:
            return
        obs = stack_rows([row[SampleBatch.OBS] for _, row, _, _ in waiting])
        state_in = [stack_rows([running.states[k] for running, _, _, _ in waiting])
                    for k in range(len(self._initial_state))]
        prev = {}
        if self._reads_prev:
            prev = dict(prev_action_batch=stack_rows([running.prev_action for running, _, _, _ in waiting]),
                        prev_reward_batch=np.array([running.prev_reward for running, _, _, _ in waiting],
                                                   np.float32))
        started = time.perf_counter()
        actions, state_out, extra = batched_policy_outputs(*self.policy.compute_actions(
            obs, state_batches=state_in or None, explore=explore, timestep=timestep, **prev))
        logged = [j for j, entry in enumerate(waiting) if entry[3] is not None]
        if logged:
            actions, extra = take_logged_actions(self.policy, [entry[3] for entry in waiting],
                                                 logged, obs, actions, extra)
        self.perf.add_inference(time.perf_counter() - started)
        env_actions = self.adapter(actions)
        self.env_steps_sampled += len(waiting)
        for j, (running, row, reply, _) in enumerate(waiting):
            row[SampleBatch.ACTIONS] = row_of(actions, j)
            for key, value in extra.items():
                row[key] = row_of(value, j)
            for k in range(len(state_in)):
                row[SampleBatch.state_in(k)] = state_in[k][j]
                row[SampleBatch.state_out(k)] = row_of(state_out[k], j)
                running.states[k] = row_of(state_out[k], j)
            if prev:
                row[SampleBatch.PREV_ACTIONS] = row_of(prev["prev_action_batch"], j)
                row[SampleBatch.PREV_REWARDS] = prev["prev_reward_batch"][j]
                running.prev_action = row[SampleBatch.ACTIONS]
            running.unacted -= 1
            running.episode.length += 1
            running.episode.record_action(0, row[SampleBatch.ACTIONS])
            if SampleBatch.NEXT_OBS in row and running.training:
                self._record(running, row)
                self.book.held_rows -= 1
            if reply is not None:
                reply.set(self.adapter.env_action(env_actions, j))

    def _postprocess(self, pieces: List[tuple]) -> SampleBatch:
        unroll_id = next_unroll_id()
        batches = []
        for trajectory, slot in pieces:
            raw = trajectory.build(0, unroll_id)
            raw[SampleBatch.ENV_ID] = np.full(raw.count, slot, np.int64)
            batch = self.policy.postprocess_trajectory(raw, None, trajectory.episode)
            self.callbacks.on_postprocess_trajectory(
                worker=self.worker, episode=trajectory.episode, agent_id=0,
                policy_id=self.policy_id, policies=self.worker.policy_map,
                postprocessed_batch=batch, original_batches={0: (self.policy_id, raw)})
            batches.append(batch)
        return concat_samples(batches) if batches else SampleBatch()


def _rows(batch: Any, start: int, stop: int) -> list:
    """Rows `start` to `stop` of a batch (an array, or a nest of arrays) as a list of rows."""
    if isinstance(batch, np.ndarray):
        return list(batch[start:stop])
    return [row_of(batch, i) for i in range(start, stop)]
