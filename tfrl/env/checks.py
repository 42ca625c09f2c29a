"""Env validation: the checks rollout workers run on environments, observations and actions.

They turn the ways an environment and a policy can disagree (a malformed env, spaces a policy
cannot handle, an action outside the action space, a NaN observation) into named `tfrl.errors`
exceptions that say which env and what to do, raised at construction where the problem can be
seen then, and otherwise at the step where it shows. The per-step checks work on whole batches
(one numpy call per step for all of a worker's envs), so they stay cheap.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tfrl import errors
from tfrl.env.base_env import BaseEnv
from tfrl.env.external_env import ExternalEnv
from tfrl.env.multi_agent_env import MultiAgentEnv
from tfrl.env.vector_env import VectorEnv


def check_env(env: Any, env_name: str) -> None:
    """Checks that `env` looks like a gymnasium env or a `MultiAgentEnv` with gymnasium spaces
    (a `MultiAgentEnv` may declare none: its policy specs then give them), or like classic
    RLlib's `VectorEnv` (a positive `num_envs`, spaces) or `BaseEnv` (spaces optional).

    Raises:
      InvalidEnvError: a method, a space or a VectorEnv's `num_envs` is missing or of the
        wrong kind.
    """
    import gymnasium

    if isinstance(env, VectorEnv):
        methods = ("vector_reset", "reset_at", "vector_step")
        num_envs = getattr(env, "num_envs", None)
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) \
                or num_envs < 1:
            raise errors.InvalidEnvError(
                f"env {env_name!r} ({type(env).__name__}) is a VectorEnv with num_envs "
                f"{num_envs!r}; call VectorEnv.__init__(observation_space, action_space, "
                "num_envs) with num_envs >= 1")
    elif isinstance(env, BaseEnv):
        methods = ("poll", "send_actions")
    else:
        methods = () if isinstance(env, ExternalEnv) else ("reset", "step")
    for method in methods:
        if not callable(getattr(env, method, None)):
            raise errors.InvalidEnvError(
                f"env {env_name!r} ({type(env).__name__}) has no {method}() method; an env must be a "
                "gymnasium.Env, a tfrl.env.MultiAgentEnv, a tfrl.env.ExternalEnv, or classic "
                "RLlib's VectorEnv or BaseEnv")
    if isinstance(env, BaseEnv):
        # a multi-agent BaseEnv declares none: the policy specs give them
        spaces = [(f"shared {kind} space", None, getattr(env, f"{kind}_space"))
                  for kind in ("observation", "action")
                  if getattr(env, f"{kind}_space", None) is not None]
    elif isinstance(env, MultiAgentEnv):
        # per-agent dicts, shared spaces (classic RLlib), or none: then the policy specs give
        # them, and the worker names what is missing when it builds the policies
        spaces = [(f"{kind} space", a, s) for kind in ("observation", "action")
                  for a, s in (getattr(env, f"{kind}_spaces", None) or {}).items()]
        spaces += [(f"shared {kind} space", None, getattr(env, f"{kind}_space"))
                   for kind in ("observation", "action")
                   if getattr(env, f"{kind}_space", None) is not None]
    else:
        spaces = [("observation space", None, getattr(env, "observation_space", None)),
                  ("action space", None, getattr(env, "action_space", None))]
    for what, agent, space in spaces:
        if not isinstance(space, gymnasium.spaces.Space):
            who = f" of agent {agent!r}" if agent is not None else ""
            raise errors.InvalidEnvError(
                f"env {env_name!r}: the {what}{who} is {space!r}, not a gymnasium space; set it to a "
                "gymnasium.spaces.Space (Box, Discrete, ...)")


def check_observations_finite(obs_batch: Any, env_name: str, where: str) -> None:
    """Checks that a batch of observations holds no NaN or infinity (float leaves only).

    Raises:
      InvalidObservationError: a NaN or infinite value; the message names the env and `where`.
    """
    if isinstance(obs_batch, np.ndarray):
        leaves = [obs_batch]
    else:
        import tree

        leaves = [np.asarray(x) for x in tree.flatten(obs_batch)]
    for leaf in leaves:
        if leaf.dtype.kind == "f" and not np.isfinite(leaf).all():
            bad = np.argwhere(~np.isfinite(leaf))[0].tolist()
            raise errors.InvalidObservationError(
                f"env {env_name!r} returned a non-finite observation ({leaf[tuple(bad)].tolist()!r} at index "
                f"{bad}) {where}; fix the env, or wrap it so it never emits NaN or infinity")


def check_actions_in_space(actions: np.ndarray, action_space: Any, env_name: str) -> None:
    """Checks a batch of actions (leading batch dimension) against `action_space`.

    Box and Discrete spaces are checked with one vectorised comparison (so are the Box and
    Discrete leaves of a Dict/Tuple space's nest of batches); other spaces action by action with
    `space.contains`.

    Raises:
      ActionOutOfSpaceError: an action lies outside the space; the message names the env, the
        action and how to fix it (clip_actions / normalize_actions for Box spaces).
    """
    import gymnasium

    spaces = gymnasium.spaces
    if isinstance(action_space, spaces.Discrete):
        a = np.asarray(actions)
        bad = (a < action_space.start) | (a >= action_space.start + action_space.n)
        if bad.any():
            index = int(np.argmax(bad))
            raise errors.ActionOutOfSpaceError(
                f"env {env_name!r}: the policy chose action {np.asarray(a[index]).tolist()!r}, outside {action_space}; "
                "the policy's action distribution does not match the env's action space")
        return
    if isinstance(action_space, spaces.Box):
        a = np.asarray(actions)
        inside = (a >= action_space.low) & (a <= action_space.high)
        if a.shape[1:] != action_space.shape or not inside.all():
            index = 0 if a.shape[1:] != action_space.shape else int(
                np.argmax(~inside.reshape(len(a), -1).all(axis=1)))
            raise errors.ActionOutOfSpaceError(
                f"env {env_name!r}: the policy chose action {np.asarray(a[index]).tolist()!r}, outside {action_space}; "
                "set clip_actions=True to clip actions to the bounds, or normalize_actions=True "
                "for a policy acting in [-1, 1]")
        return
    if isinstance(action_space, (spaces.Tuple, spaces.Dict)) and not isinstance(
            actions, np.ndarray):
        import tree

        from tfrl.spaces.structure import flatten_space

        # a nest of batches: each leaf batch against its leaf space (vectorised for Box and
        # Discrete leaves), when the nest has the space's leaves
        leaf_spaces = flatten_space(action_space)
        leaves = tree.flatten(actions)
        if len(leaves) == len(leaf_spaces):
            for leaf, space in zip(leaves, leaf_spaces):
                check_actions_in_space(leaf, space, env_name)
            return
    if isinstance(actions, np.ndarray):
        rows = list(actions)
    else:  # a nest of batched arrays (Dict/Tuple action spaces): one nest per row
        import tree

        leaves = tree.flatten(actions)
        rows = [tree.unflatten_as(actions, [leaf[i] for leaf in leaves])
                for i in range(len(leaves[0]))]
    for action in rows:
        if not action_space.contains(action):
            raise errors.ActionOutOfSpaceError(
                f"env {env_name!r}: the policy chose action {action!r}, outside {action_space}")
