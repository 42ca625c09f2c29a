"""What the policy service sends: gymnasium spaces as JSON and space values as Tensor messages.

Both directions are plain data (a dtype name, a shape and raw bytes; JSON for spaces), decoded
with numpy and checked; nothing received is unpickled. Part of the serving bridge
(tfrl/serving/): the server decodes observations and actions with its own spaces, a
local-inference client rebuilds the spaces from their JSON.
"""
from __future__ import annotations

import json
from typing import Any, List

import gymnasium.spaces as spaces
import numpy as np
import tree

from tfrl import errors
from tfrl.serving.proto import policy_service_pb2 as pb

# the dtypes a Tensor may carry: numbers and booleans only (no objects, no strings)
ALLOWED_DTYPES = frozenset(["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                            "uint64", "float16", "float32", "float64"])


# dtype -> (its name, the little-endian dtype it travels as); numpy's dtype.name is slow
_WIRE_DTYPES: dict = {}
# a Tensor's dtype name -> (the little-endian dtype it travels as, the native dtype it becomes)
_READ_DTYPES: dict = {}


def _wire_dtype(dtype: np.dtype) -> tuple:
    wire = _WIRE_DTYPES.get(dtype)
    if wire is None:
        if dtype.name not in ALLOWED_DTYPES:
            raise errors.ExternalEnvError(
                f"cannot send a value of dtype {dtype}; send numbers or booleans "
                f"({', '.join(sorted(ALLOWED_DTYPES))})")
        wire = _WIRE_DTYPES[dtype] = (dtype.name, dtype.newbyteorder("<"))
    return wire


def tensor_message(value: Any) -> pb.Tensor:
    array = np.asarray(value)
    name, little_endian = _wire_dtype(array.dtype)
    return pb.Tensor(dtype=name, shape=array.shape,
                     data=array.astype(little_endian, copy=False).tobytes(order="C"))


def tensor_array(message: pb.Tensor) -> np.ndarray:
    """The array a Tensor message holds.

    Raises:
      ExternalEnvError: a dtype that is not allowed, a negative dimension, or bytes that do not
        match the shape.
    """
    dtypes = _READ_DTYPES.get(message.dtype)
    if dtypes is None:
        if message.dtype not in ALLOWED_DTYPES:
            raise errors.ExternalEnvError(
                f"tensor dtype {message.dtype!r} is not one of {sorted(ALLOWED_DTYPES)}")
        wire = np.dtype(message.dtype).newbyteorder("<")
        dtypes = _READ_DTYPES[message.dtype] = (wire, wire.newbyteorder("="))
    wire, native = dtypes
    shape = tuple(message.shape)
    count = 1
    for dimension in shape:
        if dimension < 0:
            raise errors.ExternalEnvError(f"tensor shape {shape} has a negative dimension")
        count *= dimension
    data = message.data
    if len(data) != count * wire.itemsize:
        raise errors.ExternalEnvError(
            f"tensor of dtype {message.dtype} and shape {list(shape)} needs "
            f"{count * wire.itemsize} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=wire).astype(native).reshape(shape)


def encode_value(value: Any) -> pb.SpaceValue:
    """A space value (an array, a number, or a dict/tuple nest of them) as a SpaceValue."""
    if type(value) is np.ndarray:  # the common case: one leaf, no nest to walk
        return pb.SpaceValue(leaves=[tensor_message(value)])
    return pb.SpaceValue(leaves=[tensor_message(leaf) for leaf in tree.flatten(value)])


def decode_value(message: pb.SpaceValue, space, what: str) -> Any:
    """The value of `space` a SpaceValue holds (a Discrete's as an int64 scalar). Whether it lies
    in the space is the ExternalEnv's check.

    Raises:
      ExternalEnvError: a malformed tensor, or a number of leaves other than the space has.
    """
    if not isinstance(space, (spaces.Dict, spaces.Tuple)):  # one leaf: the common case, fast
        if len(message.leaves) != 1:
            raise errors.ExternalEnvError(
                f"the {what} has {len(message.leaves)} leaves, but the {what} space {space} has 1")
        leaf = tensor_array(message.leaves[0])
        return leaf[()] if leaf.ndim == 0 else leaf
    structure = space_structure(space)
    leaves = [tensor_array(t) for t in message.leaves]
    expected = len(tree.flatten(structure))
    if len(leaves) != expected:
        raise errors.ExternalEnvError(
            f"the {what} has {len(leaves)} leaves, but the {what} space {space} has {expected}")
    leaves = [leaf[()] if leaf.ndim == 0 else leaf for leaf in leaves]
    return tree.unflatten_as(structure, leaves)


def space_structure(space) -> Any:
    """The nest of a space's values (leaves are placeholders), in dm-tree's order."""
    if isinstance(space, spaces.Dict):
        return {k: space_structure(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(space_structure(s) for s in space.spaces)
    return 0


def space_to_json(space) -> str:
    """A gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple) as JSON.

    Raises:
      UnsupportedSpaceError: another kind of space.
    """
    return json.dumps(_space_dict(space))


def space_from_json(text: str):
    """The space `space_to_json` wrote.

    Raises:
      UnsupportedSpaceError: JSON that does not describe a supported space.
    """
    try:
        return _space_from_dict(json.loads(text))
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.UnsupportedSpaceError(f"cannot read a space from {text[:200]!r}: {exc}") from exc


def _space_dict(space) -> dict:
    if isinstance(space, spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(),
                "shape": list(space.shape), "dtype": space.dtype.name}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: _space_dict(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [_space_dict(s) for s in space.spaces]}
    raise errors.UnsupportedSpaceError(
        f"the policy service cannot describe the space {space}; use Box, Discrete, MultiDiscrete, "
        "MultiBinary, Dict or Tuple")


def _space_from_dict(spec: dict):
    kind = spec["type"]
    if kind == "Box":
        dtype = np.dtype(spec["dtype"])
        if dtype.name not in ALLOWED_DTYPES:
            raise ValueError(f"dtype {dtype} not allowed")
        return spaces.Box(np.asarray(spec["low"], dtype), np.asarray(spec["high"], dtype),
                          tuple(spec["shape"]), dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(spec["n"]), start=int(spec.get("start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(spec["nvec"])
    if kind == "MultiBinary":
        return spaces.MultiBinary(spec["n"])
    if kind == "Dict":
        return spaces.Dict({k: _space_from_dict(s) for k, s in spec["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([_space_from_dict(s) for s in spec["spaces"]])
    raise ValueError(f"unknown space type {kind!r}")


def weights_message(weights: List[np.ndarray]) -> pb.WeightsResponse:
    return pb.WeightsResponse(weights=[tensor_message(w) for w in weights])
