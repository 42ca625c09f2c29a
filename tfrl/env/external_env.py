"""ExternalEnv: an environment that lives in the user's application, which asks for actions.

RLlib classic's ExternalEnv (the RLlib paper, Appendix E.1: an evaluator that bridges training
and serving). Where a gymnasium env is stepped by the rollout worker, an ExternalEnv steps itself:
its `run()` (a thread the worker starts) owns the loop and calls

    episode_id = self.start_episode()
    action = self.get_action(episode_id, observation)   # blocks until the policy answers
    self.log_returns(episode_id, reward)                # any number of times between actions
    self.log_action(episode_id, observation, action)    # an action the application chose itself
    self.log_actions(episode_id, observations, actions) # many such steps at once, as arrays
    self.end_episode(episode_id, observation)           # the episode's final observation

Each call is checked here, in the caller's thread (an unknown or finished episode id, an
observation outside the observation space, an action outside the action space, too many
episodes at once), and raises before anything is recorded. The calls become events in one
queue, in order; the worker's `ExternalEnvRunner` (tfrl/rollout/external_sampler.py) turns them
into rows, answers `get_action` with one batched `compute_actions` call for every episode waiting
at that moment, and builds the fragments that training reads. `tfrl.serving.PolicyServer` is an
ExternalEnv whose calls come from remote `PolicyClient`s over gRPC. The multi-agent form, with
dicts keyed by agent id, is `ExternalMultiAgentEnv` (external_multi_agent_env.py).

A worker hosting an ExternalEnv has exactly one env (`num_envs_per_worker: 1`); the usual setup
is `num_workers: 0`, where the trainer's own worker serves it (with remote workers, each hosts
its own: tfrl.serving.PolicyServerPerWorker).
"""
from __future__ import annotations

import queue
import threading
import uuid
from typing import Any, Dict, Optional

import gymnasium.spaces as gym_spaces
import numpy as np

from tfrl import errors
from tfrl.utils.rows import row_of, stack_rows

# the kinds of event an ExternalEnv queues for its runner
START, OBSERVATION, REWARD, END = "start", "observation", "reward", "end"
# several logged steps of one episode in one event: (STEPS, episode id, observations, actions,
# rewards before each step), each with a leading dimension of one row per step
STEPS = "steps"


class ActionReply:
    """Where the runner puts the action an observation asked for; `get_action` waits on it."""

    __slots__ = ("_event", "action", "error")

    def __init__(self):
        self._event = threading.Event()
        self.action: Any = None
        self.error: Optional[BaseException] = None

    def set(self, action: Any) -> None:
        self.action = action
        self._event.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._event.set()

    def wait(self, timeout: Optional[float]) -> Any:
        if not self._event.wait(timeout):
            raise errors.ActionTimeoutError(
                f"no action within {timeout} s: the trainer is not sampling (call train(), or "
                "raise the timeout)")
        if self.error is not None:
            raise self.error
        return self.action


class ExternalEnv(threading.Thread):
    """An env whose own thread (`run()`) asks the worker's policy for actions; see the module
    docstring.

    Args:
      action_space, observation_space: gymnasium spaces of the application's actions and
        observations.
      max_concurrent: the most episodes running at once; one more `start_episode` raises.
      action_timeout_s: how long `get_action` waits for the policy (None: forever).
    """

    def __init__(self, action_space, observation_space, max_concurrent: int = 100,
                 action_timeout_s: Optional[float] = None):
        super().__init__(name=f"{type(self).__name__}", daemon=True)
        self.action_space = action_space
        self.observation_space = observation_space
        self.max_concurrent = int(max_concurrent)
        self.action_timeout_s = action_timeout_s
        self.events = EventQueue()
        self._lock = threading.Lock()
        self._running: Dict[str, bool] = {}  # episode id -> training enabled
        self._stopped = threading.Event()
        self._replies: set = set()  # the ActionReplies get_action calls wait on
        self.run_error: Optional[BaseException] = None

    # --- the application's side -------------------------------------------------------------
    def run(self) -> None:
        """The application's loop; override it (a PolicyServer's is its gRPC server)."""
        raise NotImplementedError(
            f"{type(self).__name__}.run() must be implemented: the loop that starts episodes and "
            "asks for actions")

    def start_episode(self, episode_id: Optional[str] = None, training_enabled: bool = True) -> str:
        """Starts an episode and returns its id (`episode_id`, or a new random one).

        Raises:
          ExternalEnvError: the id is already running, or `max_concurrent` episodes are.
        """
        episode_id = uuid.uuid4().hex if episode_id is None else str(episode_id)
        with self._lock:
            self._check_open()
            if episode_id in self._running:
                raise errors.ExternalEnvError(
                    f"episode {episode_id!r} is already running; end it first or use a new id")
            if len(self._running) >= self.max_concurrent:
                raise errors.ExternalEnvError(
                    f"{len(self._running)} episodes are running, the most this env allows "
                    f"(max_concurrent={self.max_concurrent}); end some first")
            self._running[episode_id] = bool(training_enabled)
            self.events.put((START, episode_id, bool(training_enabled)))
        return episode_id

    def get_action(self, episode_id: str, observation: Any, reward: float = 0.0) -> Any:
        """The policy's action for `observation`; blocks until the worker answers. `reward`:
        rewards earned since the previous call, logged first (as `log_returns` would), once the
        call is checked.

        Raises:
          ExternalEnvError: an unknown or finished episode, a bad reward, or the env closed.
          ActionTimeoutError: no answer within `action_timeout_s`.
          InvalidObservationError: an observation outside the observation space.
        """
        reply = ActionReply()
        with self._lock:
            self._replies.add(reply)
        try:
            self._queue_observation(episode_id, observation, reply, None, reward)
            return reply.wait(self.action_timeout_s)
        finally:
            with self._lock:
                self._replies.discard(reply)

    def log_action(self, episode_id: str, observation: Any, action: Any, reward: float = 0.0) -> None:
        """Records an action the application took itself (off-policy) for `observation`;
        `reward` as in `get_action`.

        Raises:
          ExternalEnvError: an unknown or finished episode, a bad reward, or the env closed.
          InvalidObservationError, ActionOutOfSpaceError: a value outside its space.
        """
        action = self._checked(action, self.action_space, "action", errors.ActionOutOfSpaceError)
        self._queue_observation(episode_id, observation, None, action, reward)

    def log_actions(self, episode_id: str, observations: Any, actions: Any,
                    rewards: Any = None) -> None:
        """Records several consecutive steps the application took itself, as one `log_action`
        call per row (in order) would, at a fraction of the cost: `observations` and `actions`
        are stacked (arrays, or nests of arrays, with one row per step), `rewards[i]` the
        rewards earned before step i (None: none). Checked whole: a bad row refuses the call and
        records nothing of it.

        Raises:
          ExternalEnvError: an unknown or finished episode, rows of unequal number, a bad
            reward, or the env closed.
          InvalidObservationError, ActionOutOfSpaceError: a row outside its space (the message
            names the row).
        """
        observations = self._checked_rows(observations, self.observation_space, "observation",
                                          errors.InvalidObservationError)
        actions = self._checked_rows(actions, self.action_space, "action",
                                     errors.ActionOutOfSpaceError)
        count = _row_count(observations)
        if _row_count(actions) != count:
            raise errors.ExternalEnvError(
                f"log_actions got {count} observations but {_row_count(actions)} actions; send "
                "one action per observation")
        if rewards is None or len(rewards) == 0:
            rewards = np.zeros(count, np.float64)
        else:
            rewards = np.asarray(rewards, np.float64).reshape(-1)
            if len(rewards) != count:
                raise errors.ExternalEnvError(
                    f"log_actions got {count} steps but {len(rewards)} rewards; send one reward "
                    "per step (or none)")
            if not np.all(np.isfinite(rewards)):
                raise errors.ExternalEnvError(
                    f"rewards must be finite, got {rewards[~np.isfinite(rewards)][0]} at step "
                    f"{int(np.argmin(np.isfinite(rewards)))}")
        if count == 0:
            return
        with self._lock:
            self._check_running(episode_id)
            self._put_event(episode_id, (STEPS, episode_id, observations, actions, rewards))

    def log_returns(self, episode_id: str, reward: float, info: Optional[dict] = None) -> None:
        """Adds `reward` to the episode's current step (several calls add up).

        Raises:
          ExternalEnvError: an unknown or finished episode, a reward that is not a finite
            number, or the env closed.
        """
        reward = _finite_reward(reward)
        with self._lock:
            self._check_running(episode_id)
            self._put_event(episode_id, (REWARD, episode_id, reward, info))

    def end_episode(self, episode_id: str, observation: Any, truncated: bool = False,
                    reward: float = 0.0) -> None:
        """Ends the episode with its final observation: terminated, or with `truncated` cut
        short (a time limit), so training bootstraps from the observation's value; `reward` as in
        `get_action`.

        Raises:
          ExternalEnvError: an unknown or finished episode, a bad reward, or the env closed.
          InvalidObservationError: an observation outside the observation space.
        """
        observation = self._checked(observation, self.observation_space, "observation",
                                    errors.InvalidObservationError)
        reward = _finite_reward(reward)
        with self._lock:
            self._check_running(episode_id)
            del self._running[episode_id]
            self._put_reward(episode_id, reward)
            self._put_event(episode_id, (END, episode_id, observation, bool(truncated)))

    # --- the worker's side ----------------------------------------------------------------------
    def bind_policy(self, policy, config: dict, action_adapter=None) -> None:
        """Called by the worker's runner with the policy that acts here, its config and the
        runner's `ActionAdapter` (a PolicyServer serves the first two to local-inference clients
        and answers inline through the adapter)."""

    def refresh_policy(self, explore: bool) -> None:
        """Called by the worker's runner at the start of every sample(): the bound policy's
        weights may have changed since the last call, and `explore` is how it acts now (a
        PolicyServer refreshes its inline copy)."""

    @property
    def inline_actor(self):
        """The numpy copy of the bound policy this env acts with itself (a PolicyServer's inline
        answers), refreshed with the policy at each `refresh_policy`, or None. The runner
        computes the outputs of this env's steps with it where it reproduces them."""
        return None

    def flush_buffered_steps(self) -> None:
        """Queues the steps this env holds back to send in blocks (a PolicyServer's inline
        answers); the worker's runner calls it whenever it finds no event waiting. The base
        class holds nothing back."""

    def close(self) -> None:
        """Stops the env: calls after this raise, and a `get_action` still waiting fails."""
        with self._lock:
            self._stopped.set()
            self._running.clear()
            waiting, self._replies = self._replies, set()
        for reply in waiting:
            reply.fail(errors.ExternalEnvError(f"{type(self).__name__} was closed while this "
                                               "call waited for its action"))
        self.events.put((END, None, None, False))  # wakes a runner waiting for events

    @property
    def closed(self) -> bool:
        return self._stopped.is_set()

    def start_thread(self) -> None:
        """Starts `run()` in its thread once (the worker calls this); a failure of `run()` is
        kept in `run_error` for the runner to raise."""
        if self.ident is not None:  # started before
            return
        body = self.run

        def guarded_run():
            try:
                body()
            except BaseException as exc:  # noqa: BLE001 - reported by the runner
                self.run_error = exc

        self.run = guarded_run  # type: ignore[method-assign]
        self.start()

    # --- checks ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._stopped.is_set():
            raise errors.ExternalEnvError(f"{type(self).__name__} is closed")

    def _check_running(self, episode_id: str) -> None:
        self._check_open()
        if episode_id not in self._running:
            raise errors.ExternalEnvError(
                f"unknown episode id {episode_id!r} (never started, or already ended); call "
                "start_episode() first")

    def _checked(self, value: Any, space, what: str, error: type) -> Any:
        if type(value) is np.ndarray and type(space) is gym_spaces.Box \
                and value.dtype == space.dtype and value.shape == space.shape:
            # the common case, as Box.contains decides it without its conversions
            if (value >= space.low).all() and (value <= space.high).all():
                return value
        converted = _as_space_value(value, space)
        if converted is None or not space.contains(converted):
            raise error(
                f"the {what} {_short(value)} is not in the {what} space {space}; send values of "
                "that space (dtype and shape included)")
        return converted

    def _checked_rows(self, rows: Any, space, what: str, error: type) -> Any:
        """Stacked values of `space` (one row per step) converted as `_checked` converts one
        value; Box and Discrete rows are checked with one vectorised comparison."""
        if isinstance(space, (gym_spaces.Box, gym_spaces.Discrete)):
            array = np.asarray(rows)
            if isinstance(space, gym_spaces.Box):
                good_type = np.can_cast(array.dtype, space.dtype, "same_kind")
            else:
                good_type = np.issubdtype(array.dtype, np.integer)
            if array.ndim != 1 + len(space.shape) or array.shape[1:] != space.shape \
                    or not good_type:
                raise error(
                    f"the {what}s have shape {array.shape} and dtype {array.dtype}, but rows of "
                    f"the {what} space {space} need shape (steps, *{space.shape}) and dtype "
                    f"{space.dtype}")
            if isinstance(space, gym_spaces.Box):
                array = array.astype(space.dtype, copy=False)
                axes = tuple(range(1, array.ndim))
                inside = np.all((array >= space.low) & (array <= space.high), axis=axes)
            else:
                array = array.astype(np.int64, copy=False)
                inside = (array >= space.start) & (array < space.start + space.n)
            if not np.all(inside):
                bad = int(np.argmin(inside))
                raise error(
                    f"step {bad} of {len(array)}: the {what} {_short(array[bad])} is not in the "
                    f"{what} space {space}; send values of that space (dtype and shape included)")
            return array
        try:
            count = _row_count(rows)
        except (TypeError, ValueError, IndexError):
            raise error(f"the {what}s are not stacked rows of the {what} space {space}") from None
        checked = []
        for i in range(count):
            try:
                checked.append(self._checked(row_of(rows, i), space, what, error))
            except error as exc:
                raise error(f"step {i} of {count}: {exc}") from None
        return stack_rows(checked) if checked else rows

    def _put_event(self, episode_id: str, event: tuple) -> None:
        """Queues an event of a running episode; called with the lock held (a subclass that
        holds steps back queues that episode's first, so the events stay in order)."""
        self.events.put(event)

    def _put_reward(self, episode_id: str, reward: float) -> None:
        if reward:
            self._put_event(episode_id, (REWARD, episode_id, reward, None))

    def _queue_observation(self, episode_id: str, observation: Any, reply: Optional[ActionReply],
                           action: Any, reward: float) -> None:
        observation = self._checked(observation, self.observation_space, "observation",
                                    errors.InvalidObservationError)
        self._queue_checked_observation(episode_id, observation, reply, action, reward)

    def _queue_checked_observation(self, episode_id: str, observation: Any,
                                   reply: Optional[ActionReply], action: Any,
                                   reward: float) -> None:
        reward = _finite_reward(reward)
        with self._lock:
            self._check_running(episode_id)
            self._put_reward(episode_id, reward)
            self._put_event(episode_id, (OBSERVATION, episode_id, observation, reply, action))


class EventQueue(queue.Queue):
    """The env's queue of events, counting the steps they hold (`steps`: one per OBSERVATION,
    a STEPS event's rows), so that a server can bound what waits for the worker in steps."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.steps = 0

    def _put(self, item: tuple) -> None:
        super()._put(item)
        self.steps += _steps_in(item)

    def _get(self) -> tuple:
        item = super()._get()
        self.steps -= _steps_in(item)
        return item


def _steps_in(event: tuple) -> int:
    kind = event[0]
    return 1 if kind == OBSERVATION else len(event[4]) if kind == STEPS else 0


def _as_space_value(value: Any, space) -> Any:
    """`value` in the form `space.contains` expects (arrays of the space's dtype for Box, ints
    for Discrete), or None when it cannot be converted."""
    import gymnasium.spaces as spaces

    try:
        if isinstance(space, spaces.Box):
            array = np.asarray(value)
            if array.shape != space.shape or not np.can_cast(array.dtype, space.dtype, "same_kind"):
                return None
            return array.astype(space.dtype, copy=False)
        if isinstance(space, spaces.Discrete):
            array = np.asarray(value)
            if array.shape != () or not np.issubdtype(array.dtype, np.integer):
                return None
            return np.int64(array)
        if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
            array = np.asarray(value)
            return array.astype(space.dtype) if np.issubdtype(array.dtype, np.integer) else None
        if isinstance(space, spaces.Dict):
            if not isinstance(value, dict) or set(value) != set(space.spaces):
                return None
            parts = {k: _as_space_value(value[k], s) for k, s in space.spaces.items()}
            return None if any(v is None for v in parts.values()) else parts
        if isinstance(space, spaces.Tuple):
            if not isinstance(value, (tuple, list)) or len(value) != len(space.spaces):
                return None
            parts = tuple(_as_space_value(v, s) for v, s in zip(value, space.spaces))
            return None if any(v is None for v in parts) else parts
    except (TypeError, ValueError):
        return None
    return value


def _row_count(rows: Any) -> int:
    """The number of rows of stacked values (the leading dimension of their first leaf)."""
    import tree

    leaves = tree.flatten(rows)
    return len(leaves[0]) if leaves else 0


def _finite_reward(reward: Any) -> float:
    try:
        reward = float(reward)
    except (TypeError, ValueError) as exc:
        raise errors.ExternalEnvError(f"reward must be a number, got {reward!r}") from exc
    if not np.isfinite(reward):
        raise errors.ExternalEnvError(f"reward must be finite, got {reward}")
    return reward


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
