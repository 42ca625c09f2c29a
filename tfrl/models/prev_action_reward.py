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

from typing import Any

import gymnasium as gym
import tensorflow as tf

from tfrl.errors import UnsupportedSpaceError
from tfrl.models.preprocessors import FlatteningPreprocessor

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


def _action_encoder(action_space: gym.Space) -> FlatteningPreprocessor:
    """The flattening preprocessor of `action_space`: its rows are the encoding above (one-hot
    Discrete and MultiDiscrete parts, the others flattened, leaves side by side).

    Raises:
      UnsupportedSpaceError: no encoding of actions of that space.
    """
    prev_action_spec(action_space)  # raises, naming the action space, for one it cannot encode
    return FlatteningPreprocessor(action_space)


def encoded_width(action_space: gym.Space) -> int:
    """Width of `encoded_prev_action_reward`'s rows."""
    return _action_encoder(action_space).size + 1


def encoded_prev_action_reward(prev_actions, prev_rewards, action_space: gym.Space):
    """[B, encoded_width] float32 rows of a batch of previous actions and rewards."""
    actions = _action_encoder(action_space).tf_transform(prev_actions)
    return tf.concat([actions, tf.reshape(tf.cast(prev_rewards, tf.float32), [-1, 1])], axis=1)
