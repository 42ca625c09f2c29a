"""Observation preprocessors: raw gymnasium observations -> the float tensor a model consumes.

Preprocessing runs *inside* the policy's traced functions (`tf_transform`), so batches and the
exported SavedModel take raw environment observations: ints for Discrete, index vectors for
MultiDiscrete, nested dicts/tuples for Dict/Tuple spaces. Discrete parts become one-hot, Dict and
Tuple spaces are flattened and concatenated (dict keys in sorted order, as dm-tree orders them),
images (rank-3 Box at the top level) keep their shape for the vision network.
`transform` is the numpy equivalent for one observation (handy for inspection and tests).
Sits under tfrl/models; the ModelCatalog picks one per observation space.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf
import tree

from tfrl.errors import UnsupportedSpaceError
from tfrl.spaces.repeated import Repeated


def _space_structure(space):
    """The space as a dm-tree structure whose leaves are non-container spaces."""
    if isinstance(space, gym.spaces.Dict):
        return {k: _space_structure(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_space_structure(s) for s in space.spaces)
    return space


def _flat_size(space) -> int:
    """The length of a preprocessed observation of `space` (any structure)."""
    return sum(_leaf_size(leaf) for leaf in tree.flatten(_space_structure(space)))


def _leaf_size(space) -> int:
    if isinstance(space, Repeated):  # classic RLlib's layout: the length, then max_len children
        return 1 + space.max_len * _flat_size(space.child_space)
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return int(np.prod(space.shape))
    raise UnsupportedSpaceError(
        f"No preprocessor for observation space {space!r}; use Box, Discrete, MultiDiscrete, "
        "MultiBinary, or Dict/Tuple of these (or wrap the env to convert observations).")


def _unbatchable(space) -> UnsupportedSpaceError:
    return UnsupportedSpaceError(
        f"observations of {space!r} are lists of varying length, which tfrl's models cannot take "
        "as a batch: use a classic custom model (model.custom_model), whose rollout workers "
        "preprocess them to flat rows as classic RLlib did")


def _leaf_spec(space) -> tf.TensorSpec:
    if isinstance(space, Repeated):
        raise _unbatchable(space)
    if isinstance(space, gym.spaces.Discrete):
        return tf.TensorSpec([None], tf.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tf.TensorSpec([None, *space.shape], tf.int64)
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return tf.TensorSpec([None, *space.shape], tf.as_dtype(np.dtype(space.dtype)))
    _leaf_size(space)  # raises
    raise AssertionError


def _leaf_tf(space, x):
    if isinstance(space, Repeated):
        raise _unbatchable(space)
    if isinstance(space, gym.spaces.Discrete):
        return tf.one_hot(tf.cast(x, tf.int64) - int(space.start), int(space.n), dtype=tf.float32)
    if isinstance(space, gym.spaces.MultiDiscrete):
        x = tf.reshape(tf.cast(x, tf.int64), [-1, int(np.prod(space.shape))])
        nvec = np.asarray(space.nvec).reshape(-1)
        starts = np.asarray(getattr(space, "start", np.zeros_like(space.nvec))).reshape(-1)
        parts = [tf.one_hot(x[:, i] - int(starts[i]), int(n), dtype=tf.float32)
                 for i, n in enumerate(nvec)]
        return tf.concat(parts, axis=-1)
    x = tf.cast(x, tf.float32)
    return tf.reshape(x, [-1, int(np.prod(space.shape))])


def _leaf_values(structure, x) -> list:
    """The values of `x` at the leaf spaces of `structure` (a _space_structure), in order."""
    return [x] if isinstance(structure, gym.Space) else tree.flatten_up_to(structure, x)


def _flat_leaves_np(structure, leaf_spaces, x) -> np.ndarray:
    return np.concatenate([_leaf_np(s, v) for s, v in zip(leaf_spaces, _leaf_values(structure, x))])


def _flat_np(space, x) -> np.ndarray:
    """One observation of `space` (any structure) preprocessed to a flat float32 vector."""
    structure = _space_structure(space)
    return _flat_leaves_np(structure, tree.flatten(structure), x)


def _leaf_np(space, x):
    if isinstance(space, Repeated):  # [length, child 0, child 1, ..., zeros up to max_len]
        out = np.zeros(_leaf_size(space), np.float32)
        out[0] = len(x)
        child = _flat_size(space.child_space)
        for i, item in enumerate(x):
            out[1 + i * child:1 + (i + 1) * child] = _flat_np(space.child_space, item)
        return out
    if isinstance(space, gym.spaces.Discrete):
        out = np.zeros(int(space.n), np.float32)
        out[int(x) - int(space.start)] = 1.0
        return out
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        starts = np.asarray(getattr(space, "start", np.zeros_like(space.nvec))).reshape(-1)
        flat = np.asarray(x).reshape(-1)
        parts = []
        for i, n in enumerate(nvec):
            p = np.zeros(int(n), np.float32)
            p[int(flat[i]) - int(starts[i])] = 1.0
            parts.append(p)
        return np.concatenate(parts)
    return np.asarray(x, np.float32).reshape(-1)


class Preprocessor:
    """Turns raw observations of `space` into float32 model inputs of shape `self.shape`.

    Raises:
        UnsupportedSpaceError: at construction, if the space (or a part of it) is not supported.
    """

    def __init__(self, space: gym.Space):
        self.original_space = space
        self._structure = _space_structure(space)
        self._leaves = tree.flatten(self._structure)
        for leaf in self._leaves:
            _leaf_size(leaf)
        self.shape = self._output_shape()
        self.size = int(np.prod(self.shape))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.shape, np.float32)

    def _output_shape(self):
        return (_flat_size(self.original_space),)

    def input_spec(self):
        """Nested TensorSpecs of a batch of raw observations (batch dimension open)."""
        return tree.map_structure(_leaf_spec, self._structure)

    def zeros(self, batch_size: int):
        """A batch of all-zero raw observations (shapes/dtypes as `input_spec`)."""
        def leaf(space):
            spec = _leaf_spec(space)
            if isinstance(space, gym.spaces.Discrete):
                return np.full([batch_size], int(space.start), np.int64)
            if isinstance(space, gym.spaces.MultiDiscrete):
                starts = getattr(space, "start", np.zeros_like(space.nvec))
                return np.broadcast_to(starts, [batch_size, *space.shape]).astype(np.int64)
            return np.zeros([batch_size, *spec.shape[1:]], spec.dtype.as_numpy_dtype)
        return tree.map_structure(leaf, self._structure)

    def tf_transform(self, obs_batch) -> tf.Tensor:
        """A batch of raw observations -> float32 tensor [B, *shape] (traceable)."""
        parts = [_leaf_tf(s, x)
                 for s, x in zip(self._leaves, _leaf_values(self._structure, obs_batch))]
        return parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)

    def transform(self, observation) -> np.ndarray:
        """One raw observation -> float32 numpy array of `self.shape`."""
        return _flat_leaves_np(self._structure, self._leaves, observation)


class NoPreprocessor(Preprocessor):
    """Box observations of rank >= 2 (images): keep the shape, cast to float32."""

    def _output_shape(self):
        return tuple(self.original_space.shape)

    def tf_transform(self, obs_batch):
        return tf.cast(obs_batch, tf.float32)

    def transform(self, observation):
        return np.asarray(observation, np.float32)


class OneHotPreprocessor(Preprocessor):
    """Discrete observations -> one-hot vectors."""


class FlatteningPreprocessor(Preprocessor):
    """Box (rank 1), MultiBinary, MultiDiscrete, Dict and Tuple spaces -> one flat vector."""


def get_preprocessor(space: gym.Space) -> type:
    """The preprocessor class for an observation space.

    Raises:
        UnsupportedSpaceError: if no preprocessor handles the space.
    """
    if isinstance(space, gym.spaces.Box) and len(space.shape) >= 2:
        return NoPreprocessor
    if isinstance(space, gym.spaces.Discrete):
        return OneHotPreprocessor
    for leaf in tree.flatten(_space_structure(space)):
        _leaf_size(leaf)
    return FlatteningPreprocessor


# the spaces classic RLlib's preprocessors changed (OneHot, DictFlattening, TupleFlattening)
CLASSIC_PREPROCESSED_SPACES = (gym.spaces.Discrete, gym.spaces.Dict, gym.spaces.Tuple, Repeated)


def classic_observation_space(space: gym.Space) -> gym.spaces.Box:
    """Classic RLlib's preprocessed space of `space`: the flat float32 `Box` of its preprocessed
    observations, with `original_space` set to `space`.

    Raises:
        UnsupportedSpaceError: a part of `space` that no preprocessor handles.
    """
    box = get_preprocessor(space)(space).observation_space
    box.original_space = space
    return box


def classic_unflattened_obs(space: gym.Space, rows):
    """Classic RLlib's flat preprocessed rows [B, n] of `space` as its models saw
    `input_dict["obs"]` (classic `restore_original_dimensions`): the rows cut into the parts of
    `space`, in its structure, Discrete and MultiDiscrete parts left one-hot, the others
    reshaped to their own shapes."""
    structure = _space_structure(space)
    leaf_spaces = tree.flatten(structure)
    rows = tf.cast(rows, tf.float32)
    parts = tf.split(rows, [_leaf_size(s) for s in leaf_spaces], axis=-1)
    leaves = [_repeated_values(s, part) if isinstance(s, Repeated)
              else part if isinstance(s, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))
              else tf.reshape(part, tf.concat([tf.shape(part)[:1], list(s.shape)], 0))
              for part, s in zip(parts, leaf_spaces)]
    return tree.unflatten_as(structure, leaves)


def _repeated_values(space: Repeated, part):
    """A Repeated part's rows [B, 1 + max_len * child] as classic RLlib's `RepeatedValues`: the
    children restored, each of shape [B, max_len, ...], and the lengths [B]."""
    from tfrl.models.repeated_values import RepeatedValues

    child = _flat_size(space.child_space)
    batch = tf.shape(part)[0]
    children = tf.reshape(part[:, 1:], [batch * space.max_len, child])

    def with_repeat_dim(leaf):
        if isinstance(leaf, RepeatedValues):  # a Repeated inside the child: lengths [B, max_len]
            return RepeatedValues(tree.map_structure(with_repeat_dim, leaf.values),
                                  with_repeat_dim(leaf.lengths), leaf.max_len)
        return tf.reshape(leaf, tf.concat([[batch, space.max_len], tf.shape(leaf)[1:]], 0))

    values = tree.map_structure(with_repeat_dim, classic_unflattened_obs(space.child_space, children))
    return RepeatedValues(values, tf.cast(part[:, 0], tf.int32), space.max_len)


def classic_restored_obs(space: gym.Space, obs_batch):
    """A batch of raw observations as classic RLlib's models saw `input_dict["obs"]`: one-hot
    Discrete parts, MultiDiscrete parts one-hot and concatenated, the rest as float32 arrays of
    their own shapes, in the structure of `space` (classic `restore_original_dimensions`)."""
    def leaf(part_space, x):
        if isinstance(part_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            return _leaf_tf(part_space, x)
        return tf.cast(x, tf.float32)

    structure = _space_structure(space)
    if isinstance(structure, gym.Space):
        return leaf(structure, obs_batch)
    return tree.map_structure_up_to(structure, leaf, structure, obs_batch)
