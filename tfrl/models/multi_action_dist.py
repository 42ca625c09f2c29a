"""The action distribution of a nested (Tuple/Dict) action space: classic RLlib's
`MultiActionDistribution`, over tfrl's leaf distributions.

`ModelCatalog.get_action_dist` returns it for Tuple and Dict action spaces. The model's flat
output [B, sum(input_lens)] is split into one slice per leaf space (in `flatten_space` order,
the order `tree.flatten` gives the matching action), each slice parameterises that leaf's own
distribution (Categorical for Discrete, MultiCategorical for MultiDiscrete, DiagGaussian for
Box), and the results are combined: actions come back as the space's nest (tuples and dicts of
[B, *leaf_shape] tensors, what a rollout worker hands its envs row by row), log-probabilities,
entropies and KLs are the sums over the leaves (the leaves are independent given the inputs).

A Box leaf of any shape is handled by a Gaussian over its flattened values, reshaped to the
leaf's shape on the way out (classic RLlib's Box(shape=()) leaves included).
"""
from __future__ import annotations

import functools
from typing import List, Sequence

import gymnasium as gym
import numpy as np
import tensorflow as tf
import tree

from tfrl.errors import UnsupportedSpaceError
from tfrl.models.distributions import ActionDistribution, _split_seed, action_dist_for_space
from tfrl.spaces.structure import flatten_space, get_base_struct_from_space

NESTED_ACTION_SPACES = (gym.spaces.Tuple, gym.spaces.Dict)


class MultiActionDistribution(ActionDistribution):
    """Independent distributions over the leaves of a Tuple/Dict action space.

    Build through `functools.partial(MultiActionDistribution, action_space=...,
    child_distributions=[...], input_lens=[...])` (what the catalog returns):
    `child_distributions` and `input_lens` are per leaf of `action_space`, in `flatten_space`
    order.

    Raises (at construction):
        UnsupportedSpaceError: if the leaves, distributions and input lengths do not match.
    """

    def __init__(self, inputs, model=None, *, action_space, child_distributions: Sequence,
                 input_lens: Sequence[int]):
        super().__init__(inputs, model)
        self.action_space = action_space
        self.action_space_struct = get_base_struct_from_space(action_space)
        self.leaf_spaces = flatten_space(action_space)
        self.input_lens = [int(n) for n in input_lens]
        if not (len(self.leaf_spaces) == len(child_distributions) == len(self.input_lens)):
            raise UnsupportedSpaceError(
                f"MultiActionDistribution: {len(self.leaf_spaces)} leaf spaces in "
                f"{action_space!r} but {len(child_distributions)} child distributions and "
                f"{len(self.input_lens)} input lengths; build it with the catalog's "
                "ModelCatalog.get_action_dist(action_space, config).")
        self.flat_child_distributions = [
            dist(part, model) for dist, part in zip(
                child_distributions, tf.split(inputs, self.input_lens, axis=-1))]

    # ----- leaves <-> nest ---------------------------------------------------------------
    def _to_nest(self, flat_actions: List[tf.Tensor]):
        """The leaves' actions ([B, flat leaf dims]) as the action space's nest of
        [B, *leaf_shape] tensors."""
        shaped = [_to_leaf_shape(a, space) for a, space in zip(flat_actions, self.leaf_spaces)]
        return tree.unflatten_as(self.action_space_struct, shaped)

    def _leaf_actions(self, x) -> List[tf.Tensor]:
        """Each leaf's share of actions `x`, in the shape its distribution takes.

        `x` is the action space's nest, a flat list of its leaves, or (classic RLlib's single
        tensor form) one [B, n] tensor of all leaves' values concatenated, each raveled.
        """
        if isinstance(x, (tf.Tensor, np.ndarray, tf.Variable)):
            x = tf.convert_to_tensor(x)
            sizes = [_flat_size(space) for space in self.leaf_spaces]
            parts = tf.split(tf.reshape(x, [tf.shape(x)[0], -1]), sizes, axis=-1)
            return [_from_flat_part(p, space) for p, space in zip(parts, self.leaf_spaces)]
        leaves = tree.flatten(x)
        if len(leaves) != len(self.leaf_spaces):
            raise UnsupportedSpaceError(
                f"MultiActionDistribution: actions with {len(leaves)} leaves for an action "
                f"space with {len(self.leaf_spaces)} ({self.action_space!r}).")
        return [_for_leaf_distribution(tf.convert_to_tensor(a), space)
                for a, space in zip(leaves, self.leaf_spaces)]

    # ----- the distribution --------------------------------------------------------------
    def sample(self, seed=None):
        """A nest of sampled actions; its log-prob is the sum of the leaves' sampled ones."""
        seeds = _split_seed(seed, len(self.flat_child_distributions))
        flat = [d.sample(seed=s) for d, s in zip(self.flat_child_distributions, seeds)]
        self._last_sample_logp = tf.add_n(
            [d.sampled_action_logp() for d in self.flat_child_distributions])
        return self._to_nest(flat)

    def _sample(self, seed):
        seeds = _split_seed(seed, len(self.flat_child_distributions))
        return self._to_nest([d._sample(s)  # noqa: SLF001 - same class family
                              for d, s in zip(self.flat_child_distributions, seeds)])

    def deterministic_sample(self):
        return self._to_nest([d.deterministic_sample() for d in self.flat_child_distributions])

    def logp(self, x):
        return tf.add_n([d.logp(a) for d, a in zip(self.flat_child_distributions,
                                                   self._leaf_actions(x))])

    def entropy(self):
        return tf.add_n([d.entropy() for d in self.flat_child_distributions])

    def kl(self, other):
        return tf.add_n([a.kl(b) for a, b in zip(self.flat_child_distributions,
                                                 other.flat_child_distributions)])

    @staticmethod
    def required_model_output_shape(action_space, model_config=None) -> int:
        return multi_action_dist_for_space(action_space)[1]


def multi_action_dist_for_space(action_space, dist_type=None):
    """(dist_class, num_outputs) for a Tuple/Dict action space: a MultiActionDistribution
    over each leaf's catalog distribution. `dist_type` applies to the Box leaves (the only
    ones with a choice); the discrete leaves keep theirs.

    Raises:
        UnsupportedSpaceError: if a leaf space has no distribution (or none of `dist_type`).
    """
    if not isinstance(action_space, NESTED_ACTION_SPACES):
        raise UnsupportedSpaceError(
            f"multi_action_dist_for_space needs a Tuple or Dict action space, got "
            f"{action_space!r}.")
    children, input_lens = [], []
    for leaf in flatten_space(action_space):
        if isinstance(leaf, gym.spaces.Box):
            dist, size = action_dist_for_space(_flat_box(leaf), dist_type)
        else:
            dist, size = action_dist_for_space(leaf)
        children.append(dist)
        input_lens.append(size)
    return functools.partial(MultiActionDistribution, action_space=action_space,
                             child_distributions=children,
                             input_lens=input_lens), int(sum(input_lens))


def _flat_box(space: gym.spaces.Box) -> gym.spaces.Box:
    """A Box leaf of any shape as the 1-D Box of its values (what its Gaussian covers)."""
    if len(space.shape) == 1:
        return space
    return gym.spaces.Box(np.reshape(space.low, [-1]), np.reshape(space.high, [-1]),
                          dtype=space.dtype)


def _flat_size(space) -> int:
    """How many values one action of a leaf space has in classic RLlib's flat action row."""
    if isinstance(space, gym.spaces.Discrete):
        return 1
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.size(space.nvec))
    return int(np.prod(space.shape))


def _to_leaf_shape(actions, space):
    if isinstance(space, gym.spaces.Box) and len(space.shape) != 1:
        return tf.reshape(actions, tf.concat([tf.shape(actions)[:1], list(space.shape)], 0))
    return actions


def _for_leaf_distribution(actions, space):
    """A leaf's actions as its distribution takes them: a Box leaf's raveled to [B, n]."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) != 1:
        return tf.reshape(actions, [tf.shape(actions)[0], int(np.prod(space.shape))])
    return actions


def _from_flat_part(part, space):
    """A leaf's columns of a classic flat action row as its distribution takes them."""
    if isinstance(space, gym.spaces.Discrete):
        return tf.cast(tf.squeeze(part, axis=-1), tf.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tf.cast(part, tf.int64)
    return tf.cast(part, tf.float32)


__all__ = ["MultiActionDistribution", "multi_action_dist_for_space", "NESTED_ACTION_SPACES"]
