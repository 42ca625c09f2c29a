"""The pieces both env runners (sampler.py, multi_agent_sampler.py) build fragments from.

Column buffers of one agent's episode segment (`Trajectory`), stacking rows into batch columns,
reward clipping, unroll ids, env calls whose failures become `EnvCrashError`, the policy
outputs of actions chosen outside `compute_actions` (`outputs_of_chosen_actions`,
`take_logged_actions`: an application's logged actions, or actions drawn by the policy's numpy
copy), and blocks of such steps gathered to travel as columns (`LoggedSteps`).
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tree

from tfrl import errors
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.episode import Episode
from tfrl.utils.rows import stack_rows

_unroll_ids = itertools.count()


def next_unroll_id() -> int:
    """A process-wide unique id for the pieces of one postprocessed fragment (`unroll_id`)."""
    return next(_unroll_ids)


def batched_policy_outputs(actions: Any, state_outs: Any, extra: Any) -> tuple:
    """`compute_actions`' (actions, state_outs, extra_fetches) with every Python list of
    per-row values (as classic custom policies return them, e.g.
    `[self.action_space.sample() for _ in obs_batch]`) stacked into an array, or a nest of
    arrays for structured rows; arrays and nests of arrays pass unchanged."""
    def batched(value):
        return stack_rows(value) if isinstance(value, list) and value else value

    return (batched(actions), [batched(s) for s in (state_outs or [])],
            {key: batched(value) for key, value in (extra or {}).items()})


def take_logged_actions(policy, logged_actions: Any, logged: Optional[List[int]], obs: Any,
                        actions: Any, extra: Dict[str, Any]) -> tuple:
    """`compute_actions`' actions and extra outputs with the actions the application logged
    (`logged_actions[j]` for each row `j` in `logged`; with `logged` None, every row's, stacked
    in `logged_actions`) in their rows, and those rows' action likelihoods recomputed where the
    policy has them. For a Dict/Tuple action space the actions are a nest of batches and each
    logged action a nest of one row's values."""
    if logged is None:
        actions = np.asarray(logged_actions, actions.dtype) \
            if isinstance(actions, np.ndarray) else logged_actions
        logged = slice(None)
    elif isinstance(actions, (dict, tuple)):  # a Dict/Tuple action space's nest of batches
        columns = [np.array(column) for column in tree.flatten(actions)]
        for j in logged:
            for column, value in zip(columns, tree.flatten(logged_actions[j])):
                column[j] = value
        actions = tree.unflatten_as(actions, columns)
    else:
        actions = np.array(actions)
        for j in logged:
            actions[j] = logged_actions[j]
    if SampleBatch.ACTION_LOGP in extra or SampleBatch.ACTION_PROB in extra:
        try:
            logp = np.asarray(policy.compute_log_likelihoods(actions, obs), np.float32)
        except errors.NotSupportedError:
            return actions, extra
        extra = dict(extra)
        for key, value in ((SampleBatch.ACTION_LOGP, logp),
                           (SampleBatch.ACTION_PROB, np.exp(logp))):
            if key in extra:
                column = np.array(extra[key])
                column[logged] = value[logged].astype(column.dtype)
                extra[key] = column
    return actions, extra


# Up to this many multiply-adds a NumpyActor computes the outputs of a batch faster than one
# TensorFlow call (whose fixed cost is 0.5-1 ms); beyond it TensorFlow's float32 kernels win.
# A 64x64 PPO policy (8.9k a row): 1,024 rows 1.0 ms in both, 6,400 rows 9.7 ms in numpy and
# 3.2 ms in TensorFlow; 256x256 (134k a row): 64 rows 0.4 against 0.8 ms, 128 rows 0.7 against 1.0.
NUMPY_OUTPUTS_MAX_MULTIPLY_ADDS = 8_000_000


def outputs_of_chosen_actions(policy, obs: Any, chosen_actions: Any, explore: bool,
                              timestep: Optional[int], actor=None) -> tuple:
    """(actions, extra outputs) for rows whose every action was chosen outside
    `compute_actions` (an application's logged actions, or the numpy copy's draws): from
    `actor` (the policy's NumpyActor, holding the weights the actions were drawn with) where it
    reproduces the policy's outputs and the batch is small (NUMPY_OUTPUTS_MAX_MULTIPLY_ADDS),
    else one call of the policy's `compute_outputs_of_actions` where it has one, else
    `compute_actions` and `take_logged_actions`."""
    if actor is not None and actor.reproduces_outputs and len(chosen_actions) \
            * actor.multiply_adds_per_row <= NUMPY_OUTPUTS_MAX_MULTIPLY_ADDS:
        actions, extra = actor.outputs_of_actions(obs, chosen_actions)
        policy.global_timestep += len(actions)  # as the policy's own call counts them
        return actions, extra
    outputs_of_actions = getattr(policy, "compute_outputs_of_actions", None)
    if outputs_of_actions is not None:
        try:
            return outputs_of_actions(obs, chosen_actions, explore=explore, timestep=timestep)
        except errors.NotSupportedError:
            pass
    actions, _, extra = batched_policy_outputs(*policy.compute_actions(
        obs, explore=explore, timestep=timestep))
    return take_logged_actions(policy, chosen_actions, None, obs, actions, extra)


class LoggedSteps:
    """Consecutive steps of one episode gathered to travel as one block of columns (a local
    client's `log_actions` call, a policy server's inline answers): each step's observation, its
    action, and the reward earned before it."""

    __slots__ = ("episode_id", "observations", "actions", "rewards")

    def __init__(self, episode_id: str):
        self.episode_id = episode_id
        self.observations: list = []
        self.actions: list = []
        self.rewards: List[float] = []

    def __len__(self) -> int:
        return len(self.rewards)

    def add(self, observation: Any, action: Any, reward: float) -> None:
        self.observations.append(observation)
        self.actions.append(action)
        self.rewards.append(reward)

    def columns(self) -> tuple:
        """(observations, actions) stacked one row per step, and the rewards as a list."""
        return stack_rows(self.observations), stack_rows(self.actions), self.rewards


def clip_rewards(rewards: np.ndarray, mode: Any) -> np.ndarray:
    """Reward clipping of config["clip_rewards"]: None/False none, True sign, a number c: [-c, c]."""
    if mode is None or mode is False:
        return rewards
    if mode is True:
        return np.sign(rewards)
    return np.clip(rewards, -float(mode), float(mode))


class Trajectory:
    """Column buffers of one agent's rows in one episode segment."""

    __slots__ = ("columns", "episode", "agent_id", "policy_id", "start_t")

    def __init__(self, episode: Episode, agent_id: Any, policy_id: str, start_t: int):
        self.columns: Dict[str, list] = defaultdict(list)
        self.episode = episode
        self.agent_id = agent_id
        self.policy_id = policy_id
        self.start_t = start_t

    def __len__(self):
        return len(self.columns[SampleBatch.REWARDS])

    def build(self, agent_index: int, unroll_id: int) -> SampleBatch:
        n = len(self)
        batch = {k: stack_rows(v) for k, v in self.columns.items()}
        batch[SampleBatch.EPS_ID] = np.full(n, self.episode.episode_id, np.int64)
        batch[SampleBatch.AGENT_INDEX] = np.full(n, agent_index, np.int64)
        batch[SampleBatch.UNROLL_ID] = np.full(n, unroll_id, np.int64)
        batch[SampleBatch.T] = np.arange(self.start_t, self.start_t + n, dtype=np.int64)
        return SampleBatch(batch)


def guard_env_call(env_name: str, what: str, fn: Callable, *args, **kwargs):
    """fn(*args, **kwargs), with any exception but tfrl's own turned into EnvCrashError.

    Raises:
      EnvCrashError: the env raised; the message names the env and the call.
    """
    try:
        return fn(*args, **kwargs)
    except errors.TfrlError:
        raise
    except Exception as exc:  # noqa: BLE001 - any env failure becomes one named error
        raise errors.EnvCrashError(
            f"env {env_name!r} raised {type(exc).__name__} in {what}: {exc}; fix the env (a worker "
            "whose env crashed is recreated by WorkerSet)") from exc
