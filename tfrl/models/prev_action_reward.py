"""The previous action and reward as inputs of a model (model config
`lstm_use_prev_action_reward`, classic RLlib's key, read by `LSTMWrapper` in recurrent.py).

A model that reads them sets `reads_prev_action_reward`; its policy then takes a batch of
previous actions (in the action space's structure) and previous rewards [B] beside the
observations when acting, and finds them in the train batch's `prev_actions` / `prev_rewards`
columns, which env runners record for such a policy (zeros at an episode's first step).

Encoded as one float row per step: a Discrete action one-hot, a MultiDiscrete one one-hot per
component, a Box or MultiBinary action flattened, the leaves of a Tuple/Dict action space side by
side; the reward as one float. (RLlib 1.0's TF wrapper fed a Discrete action as its integer;
later classic releases one-hot encoded it, as here.)
"""
from __future__ import annotations

from typing import Any, List

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.errors import UnsupportedSpaceError

PREV_REWARD_SPEC = tf.TensorSpec([None], tf.float32)


def prev_action_spec(action_space: gym.Space) -> Any:
    """TensorSpec (nest for Tuple/Dict spaces) of a batch of actions, batch dimension open."""
    if isinstance(action_space, gym.spaces.Tuple):
        return tuple(prev_action_spec(s) for s in action_space.spaces)
    if isinstance(action_space, gym.spaces.Dict):
        return {k: prev_action_spec(s) for k, s in action_space.spaces.items()}
    if isinstance(action_space, gym.spaces.Discrete):
        return tf.TensorSpec([None], tf.int64)
    if isinstance(action_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return tf.TensorSpec([None, *action_space.shape], tf.int64)
    if isinstance(action_space, gym.spaces.Box):
        return tf.TensorSpec([None, *action_space.shape], tf.float32)
    raise UnsupportedSpaceError(
        f"lstm_use_prev_action_reward: no encoding of actions of {action_space!r}")


def encoded_width(action_space: gym.Space) -> int:
    """Width of `encoded_prev_action_reward`'s rows."""
    return sum(_leaf_width(s) for s in _leaf_spaces(action_space)) + 1


def encoded_prev_action_reward(prev_actions, prev_rewards, action_space: gym.Space):
    """[B, encoded_width] float32 rows of a batch of previous actions and rewards."""
    parts: List[tf.Tensor] = []
    for space, actions in zip(_leaf_spaces(action_space), _leaf_values(action_space, prev_actions)):
        if isinstance(space, gym.spaces.Discrete):
            parts.append(tf.one_hot(tf.cast(tf.reshape(actions, [-1]), tf.int32) - int(space.start),
                                    int(space.n)))
        elif isinstance(space, gym.spaces.MultiDiscrete):
            components = tf.reshape(tf.cast(actions, tf.int32), [-1, int(np.size(space.nvec))])
            parts.extend(tf.one_hot(components[:, i], int(n))
                         for i, n in enumerate(np.ravel(space.nvec)))
        else:
            parts.append(tf.reshape(tf.cast(actions, tf.float32), [-1, int(np.prod(space.shape))]))
    parts.append(tf.reshape(tf.cast(prev_rewards, tf.float32), [-1, 1]))
    return tf.concat(parts, axis=1)


def _leaf_spaces(space: gym.Space) -> List[gym.Space]:
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for s in space.spaces for leaf in _leaf_spaces(s)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for s in space.spaces.values() for leaf in _leaf_spaces(s)]
    return [space]


def _leaf_values(space: gym.Space, values) -> list:
    """The leaves of a nest of actions, in `_leaf_spaces`'s order."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, s in enumerate(space.spaces) for leaf in _leaf_values(s, values[i])]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for k, s in space.spaces.items() for leaf in _leaf_values(s, values[k])]
    return [values]


def _leaf_width(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return int(np.prod(space.shape))
