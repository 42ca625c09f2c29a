"""Actions of a Tuple/Dict action space as classic RLlib's TF policies gave them to a
user-registered (`custom_action_dist`) distribution: one [B, n] tensor, each leaf's values
raveled and concatenated in `flatten_space` order (classic `ModelCatalog.get_action_shape`),
int64 when every leaf is Discrete, else float32.

tfrl's acting and batches keep the space's nest of actions (multi_action_dist.py), which its own
`MultiActionDistribution` takes in either form. A classic custom distribution reads the flat
form (`actions[:, 0]`), so the catalog hands it out as `with_classic_flat_actions(cls, space)`:
the same class whose `logp` flattens a nest first.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf
import tree

from tfrl.spaces.structure import flatten_space


def classic_flat_actions(actions, action_space: gym.Space) -> tf.Tensor:
    """`actions` (the space's nest of [B, ...] batches; a flat tensor passes as it is) as one
    [B, n] tensor."""
    if isinstance(actions, (tf.Tensor, np.ndarray, tf.Variable)):
        return tf.convert_to_tensor(actions)
    leaf_spaces = flatten_space(action_space)
    dtype = tf.int64 if all(isinstance(s, gym.spaces.Discrete) for s in leaf_spaces) \
        else tf.float32
    leaves = [tf.convert_to_tensor(a) for a in tree.flatten(actions)]
    rows = tf.shape(leaves[0])[0]
    return tf.concat([tf.reshape(tf.cast(a, dtype), [rows, -1]) for a in leaves], axis=1)


def with_classic_flat_actions(dist_class: type, action_space: gym.Space) -> type:
    """A subclass of `dist_class` whose `logp` takes the nest of actions tfrl hands it and
    gives `dist_class.logp` the classic flat form."""

    class ClassicFlatActions(dist_class):
        def logp(self, x):
            return super().logp(classic_flat_actions(x, action_space))

    ClassicFlatActions.__name__ = dist_class.__name__
    ClassicFlatActions.__qualname__ = dist_class.__qualname__
    ClassicFlatActions.__doc__ = dist_class.__doc__
    return ClassicFlatActions
