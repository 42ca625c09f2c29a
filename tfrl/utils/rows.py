"""Rows of a batch: a batch is an array, or a nest (dict, tuple) of arrays, whose leading axis
counts the rows; these take one row out and stack rows back into a batch. Used by env runners,
external envs and numpy policies alike.
"""
from __future__ import annotations

from typing import Any, List

import gymnasium as gym
import numpy as np
import tree


def stack_rows(rows: List[Any], space: Any = None) -> Any:
    """Stacks a list of rows (arrays, scalars or nests of them) along a new first axis. Given
    the rows' space, rows of a Tuple or Dict space are first put in its structure: classic gym
    envs give a Tuple observation as a list (`[[x, y], wind]`), which classic RLlib's
    preprocessors read as the tuple it stands for."""
    if isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):
        rows = [as_space_nest(space, row) for row in rows]
    first = rows[0]
    if isinstance(first, (dict, tuple)) and not isinstance(first, np.ndarray):
        return tree.map_structure(lambda *xs: np.stack(xs), *rows)
    if isinstance(first, np.ndarray):
        if first.dtype != object and all(type(row) is np.ndarray for row in rows):
            out = np.array(rows)  # a third of np.stack's time for a few dozen small rows
            if out.shape == (len(rows),) + first.shape:
                return out
        return np.stack(rows)
    return np.asarray(rows)


def row_of(batch: Any, i: int) -> Any:
    """Row `i` of a batch (an array, or a nest of arrays)."""
    if isinstance(batch, np.ndarray):
        return batch[i]
    return tree.map_structure(lambda a: a[i], batch)


def as_space_nest(space: Any, value: Any) -> Any:
    """`value` in the structure of `space`: a Tuple space's part as a tuple (a list accepted),
    a Dict space's as a dict, each other part an array (one given as a list or a number becomes
    an array of its space's dtype; an array stays as it is)."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(as_space_nest(part, value[i]) for i, part in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Dict):
        return {key: as_space_nest(part, value[key]) for key, part in space.spaces.items()}
    if type(value) is np.ndarray or getattr(space, "dtype", None) is None:
        return value
    return np.asarray(value, dtype=space.dtype)


def zero_rows(space: gym.Space, count: int) -> Any:
    """`count` rows of zeros of `space` (a nest of arrays for Tuple/Dict spaces): what env
    runners give as the previous action at an episode's first step. Discrete, MultiDiscrete
    and MultiBinary rows are int64 (the dtype of sampled actions), Box rows float32."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(zero_rows(s, count) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: zero_rows(s, count) for k, s in space.spaces.items()}
    dtype = np.float32 if isinstance(space, gym.spaces.Box) else np.int64
    return np.zeros((count, *space.shape), dtype)
