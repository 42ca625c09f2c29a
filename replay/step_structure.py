"""How the trajectory writer compares steps: nests of one structure, the union of two column
structures (Reverb's), string dtypes of any width, and dtype names for its messages.

Part of the trajectory writer (`replay.trajectory_writer`); numpy and dm-tree only.
See docs/architecture.md, "Module map" and "Data path".
"""
from __future__ import annotations

import itertools

import numpy as np
import tree

from replay import specs


def _dtype_text(dtype: np.dtype, other: np.dtype) -> str:
    """TensorFlow's name of `dtype` (as Reverb's messages give it), or numpy's where both have
    the same TensorFlow name (bytes and str strings)."""
    name = specs.tf_dtype_name(dtype)
    return f"{name} ({dtype.str})" if name == specs.tf_dtype_name(other) else name


def _both_strings(a: np.dtype, b: np.dtype) -> bool:
    """Two fixed-width string dtypes of one kind (bytes or str), of any widths: a string leaf is
    TensorFlow's tf.string, whose steps differ in length (a chunk's column takes the widest)."""
    return a.kind == b.kind and a.kind in "SU"


def _same_structure(a, b) -> bool:
    try:
        tree.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return False
    return True


def _is_named_tuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _tree_union(a, b):
    """The union of two structures whose leaves are None or column indices (Reverb's): `a`'s
    leaves win, `b` adds the paths `a` lacks."""
    if a is None or isinstance(a, int):
        return a
    if _is_named_tuple(a):
        return type(a)(**_tree_union(a._asdict(), b._asdict()))
    if isinstance(a, (list, tuple)):
        return type(a)(_tree_union(aa, bb) for aa, bb in itertools.zip_longest(a, b))
    merged = {**a}
    for k, v in b.items():
        merged[k] = _tree_union(a[k], v) if k in a else v
    return type(a)(**merged) if type(a) is not dict else merged
