"""Walking nested spaces and values (classic RLlib's `utils.spaces.space_utils`): the leaf
spaces of a Tuple/Dict space in order, the space as plain tuples/dicts, one flat array of a
nested value, and a nest of batches as a list of nests."""
from __future__ import annotations

from typing import Any, List

import gymnasium
import numpy as np
import tree

from tfrl import errors

_spaces = gymnasium.spaces


def flatten_space(space: gymnasium.Space) -> List[gymnasium.Space]:
    """The leaf (non Tuple/Dict) spaces of `space`, depth first: Tuple entries in order, Dict
    entries in the Dict's key order (the order `tree.flatten` gives the matching value).

    Raises:
      UnsupportedSpaceError: `space` is not a gymnasium space.
    """
    _require_space(space)
    leaves: List[gymnasium.Space] = []

    def walk(node):
        if isinstance(node, _spaces.Tuple):
            for child in node.spaces:
                walk(child)
        elif isinstance(node, _spaces.Dict):
            for key in _dict_keys(node):
                walk(node.spaces[key])
        else:
            leaves.append(node)

    walk(space)
    return leaves


def get_base_struct_from_space(space: gymnasium.Space) -> Any:
    """`space` as plain python: a Tuple space becomes a tuple, a Dict space a dict (the same
    keys), recursively; leaf spaces stay as they are.

    Raises:
      UnsupportedSpaceError: `space` is not a gymnasium space.
    """
    _require_space(space)

    def walk(node):
        if isinstance(node, _spaces.Tuple):
            return tuple(walk(child) for child in node.spaces)
        if isinstance(node, _spaces.Dict):
            return {key: walk(node.spaces[key]) for key in _dict_keys(node)}
        return node

    return walk(space)


def flatten_to_single_ndarray(input_: Any) -> np.ndarray:
    """One 1-D array of the leaves of a nested value (list/tuple/dict), each raveled, in
    `tree.flatten` order; an array or scalar that is not nested comes back unchanged.

    Raises:
      ValueError: a nest without leaves (nothing to concatenate).
    """
    if not isinstance(input_, (list, tuple, dict)):
        return input_
    leaves = [np.reshape(leaf, [-1]) for leaf in tree.flatten(input_)]
    if not leaves:
        raise ValueError(f"flatten_to_single_ndarray: {input_!r} holds no values")
    return np.concatenate(leaves, axis=0)


def unbatch(batches_struct: Any) -> list:
    """A nest of batches (every leaf an array of one length B) as a list of B nests: row i
    holds item i of each leaf. A plain batch gives its items. (A python list is a nest to
    `tree`, not a batch: give batches as arrays.)

    Raises:
      ValueError: a leaf is not a batch (no leading axis), the leaves differ in length, or
        there are none.
    """
    leaves = tree.flatten(batches_struct)
    if not leaves:
        raise ValueError(f"unbatch: {batches_struct!r} holds no batches")
    if any(np.ndim(leaf) == 0 for leaf in leaves):
        raise ValueError(f"unbatch: a leaf of {batches_struct!r} is a scalar, not a batch")
    lengths = {len(leaf) for leaf in leaves}
    if len(lengths) != 1:
        raise ValueError(f"unbatch: the batches in the nest differ in length ({sorted(lengths)})")
    return [tree.unflatten_as(batches_struct, [leaf[i] for leaf in leaves])
            for i in range(lengths.pop())]


def _dict_keys(space: _spaces.Dict) -> list:
    # tree.flatten orders a dict's values by sorted key: walk a Dict space the same way, so its
    # i-th leaf space describes the i-th leaf of a value (gymnasium's Dict keeps the keys of a
    # plain dict sorted already; a FlexDict keeps insertion order)
    try:
        return sorted(space.spaces)
    except TypeError:
        return list(space.spaces)


def _require_space(space: Any) -> None:
    if not isinstance(space, gymnasium.Space):
        raise errors.UnsupportedSpaceError(f"expected a gymnasium space, got {space!r}")
