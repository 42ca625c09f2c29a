"""Tensor specs without TensorFlow: the shape/dtype contract of table signatures.

A table signature is a dm-tree nest of `TensorSpec`s. The replay core checks inserted data
against it; `replay.dataset` converts to and from `tf.TensorSpec` (anything with `.shape` and
`.dtype` is accepted by `TensorSpec.from_spec`).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional, Sequence, Tuple

import numpy as np
import tree

from replay import errors

Shape = Tuple[Optional[int], ...]


# Longer dtype strings are never plain dtypes ('<U1000000' is 9 characters); parsing arbitrary
# long strings from the network would only cost time.
_MAX_DTYPE_CHARS = 32
# numpy's limit on array dimensions (numpy 1.x; numpy 2 allows 64): a column of one more
# dimension than this (the time axis) could not be decoded.
MAX_RANK = 31
# Largest single dimension (numpy's structured dtypes hold dimensions as C ints).
MAX_DIMENSION = 2**31 - 1
# Bytes one step of a column may declare. Larger values cannot arrive in one message and would
# overflow the int64 size arithmetic of decoding.
MAX_STEP_BYTES = 2**40


# TensorFlow's C++ names where they differ from numpy's (Reverb's messages use them).
_TF_DTYPE_NAMES = {"float64": "double", "float32": "float", "float16": "half"}


def tf_dtype_name(dtype: Any) -> str:
    """A dtype as TensorFlow prints it: "double", "float", "int64", "string" (any bytes, str or
    object dtype)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return "string"
    return _TF_DTYPE_NAMES.get(dtype.name, dtype.name)


def tf_shape_text(dims: Optional[Sequence[Optional[int]]]) -> str:
    """A shape as TensorFlow prints it: "[2,3]", "?" for an unknown size, "<unknown>" for an
    unknown rank (None)."""
    if dims is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _as_numpy_dtype(dtype: Any) -> np.dtype:
    # tf.DType exposes the numpy dtype as `as_numpy_dtype`; strings and numpy types go straight in.
    dtype = getattr(dtype, "as_numpy_dtype", dtype)
    return np.dtype(dtype)


@functools.lru_cache(maxsize=1024)
def _parse_dtype_string(value: str) -> np.dtype:
    return np.dtype(value)


def parse_dtype(value: Any, what: str = "dtype") -> np.dtype:
    """The numpy dtype of `value` (a dtype string such as '<f4' received from the network, a
    checkpoint or a config; or a numpy/TensorFlow dtype), if it is one that replay stores.

    This is the one place where dtypes from outside are parsed: every column is a contiguous
    array of fixed-size elements, so only plain numeric, bool, bytes and str dtypes of non-zero
    size qualify, never object, structured ("f4,i4") or subarray ("(3,)f4") dtypes.

    Raises:
      InvalidArgumentError: `value` is not a dtype numpy understands, or one of the refused
        kinds; the message starts with `what` and quotes the value.
    """
    try:
        if isinstance(value, str):
            if len(value) > _MAX_DTYPE_CHARS:
                raise ValueError(f"longer than {_MAX_DTYPE_CHARS} characters")
            dtype = _parse_dtype_string(value)
        else:
            dtype = _as_numpy_dtype(value)
    except Exception as e:  # noqa: BLE001 - numpy raises TypeError, ValueError or SyntaxError
        raise errors.InvalidArgumentError(
            f"{what} {value!r} is not a valid numpy dtype ({type(e).__name__}: {e}); use a plain "
            "dtype string such as '<f4', '<i8', '|b1' or '|S16'") from None
    if dtype.hasobject or dtype.names is not None or dtype.subdtype is not None or dtype.itemsize == 0:
        raise errors.InvalidArgumentError(
            f"{what} {value!r} is not supported: replay stores plain numeric, bool, bytes and str "
            "dtypes of non-zero size, not object, structured, subarray or zero-size dtypes (put a "
            "subarray's shape into the column's shape instead)")
    return dtype


def check_shape(shape: Sequence[int], itemsize: int = 1, what: str = "shape") -> Tuple[int, ...]:
    """`shape` (one step's dimensions) as a tuple of ints, if it can be decoded.

    Raises:
      InvalidArgumentError: a negative dimension or one over MAX_DIMENSION, more than MAX_RANK
        dimensions, or more than MAX_STEP_BYTES bytes per step (with `itemsize` bytes per
        element, zero dimensions counted as one).
    """
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_RANK:
        raise errors.InvalidArgumentError(
            f"{what} {shape} has {len(shape)} dimensions; at most {MAX_RANK} are supported")
    size = itemsize
    for d in shape:
        if not 0 <= d <= MAX_DIMENSION:
            raise errors.InvalidArgumentError(
                f"{what} {shape} has a dimension outside [0, {MAX_DIMENSION}]")
        size *= d if d else 1  # a zero dimension must not hide an overflowing one
    if size > MAX_STEP_BYTES:
        raise errors.InvalidArgumentError(
            f"{what} {shape} of {itemsize}-byte elements is larger than {MAX_STEP_BYTES} bytes per step")
    return shape


@dataclasses.dataclass(frozen=True, eq=False)
class TensorSpec:
    """Shape (None for any size of a dimension) and dtype of one leaf.

    It equals a `tf.TensorSpec` of the same shape, dtype and name (Reverb's `TableInfo`
    signatures are `tf.TensorSpec`s; replay's stay TensorFlow-free but compare alike).
    """

    shape: Shape
    dtype: np.dtype
    name: Optional[str] = None

    def __post_init__(self):
        try:
            shape = tuple(None if d is None else int(d) for d in self.shape)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(
                f"spec shape {self.shape!r} is not a sequence of ints and None") from e
        if any(d is not None and d < 0 for d in shape) or len(shape) > MAX_RANK:
            raise errors.InvalidArgumentError(
                f"spec shape {shape} needs at most {MAX_RANK} dimensions, each None or >= 0")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", parse_dtype(self.dtype, "spec dtype"))

    def __eq__(self, other) -> bool:
        if isinstance(other, TensorSpec):
            return (self.shape, self.dtype, self.name) == (other.shape, other.dtype, other.name)
        if type(other).__name__ != "TensorSpec":
            return NotImplemented
        numpy_dtype = getattr(getattr(other, "dtype", None), "as_numpy_dtype", None)
        shape = getattr(other, "shape", None)
        if numpy_dtype is None or not hasattr(shape, "as_list"):
            return NotImplemented
        dims = None if shape.rank is None else tuple(shape.as_list())
        return dims == self.shape and np.dtype(numpy_dtype) == self.dtype and other.name == self.name

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.name))

    @classmethod
    def from_spec(cls, spec: Any) -> "TensorSpec":
        shape = spec.shape
        if hasattr(shape, "as_list"):  # tf.TensorShape
            shape = shape.as_list()
        return cls(tuple(shape), spec.dtype, getattr(spec, "name", None))

    @classmethod
    def from_value(cls, value: Any) -> "TensorSpec":
        value = np.asarray(value)
        return cls(value.shape, value.dtype)

    def is_compatible_with(self, shape: Shape, dtype: np.dtype) -> bool:
        if np.dtype(dtype) != self.dtype or len(shape) != len(self.shape):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.shape, shape))

    def to_dict(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype.str, "name": self.name}

    @classmethod
    def from_dict(cls, d: dict) -> "TensorSpec":
        """Inverse of `to_dict`.

        Raises:
          InvalidArgumentError: a missing or malformed shape, dtype or name.
        """
        if not isinstance(d, dict) or "shape" not in d or "dtype" not in d:
            raise errors.InvalidArgumentError(f"a spec needs 'shape' and 'dtype', got {d!r}")
        shape, name = d["shape"], d.get("name")
        if not isinstance(shape, (list, tuple)):
            raise errors.InvalidArgumentError(f"spec shape must be a list, got {shape!r}")
        if name is not None and not isinstance(name, str):
            raise errors.InvalidArgumentError(f"spec name must be a string, got {name!r}")
        return cls(tuple(shape), parse_dtype(d["dtype"], "spec dtype"), name)


def as_signature(signature: Any) -> Any:
    """Converts a nest of tf/numpy-like specs into a nest of `TensorSpec` (None stays None)."""
    if signature is None:
        return None
    return tree.map_structure(TensorSpec.from_spec, signature)


def check_flat_columns(signature: Any, columns: list, table: str) -> None:
    """Checks flat column (shape, dtype) pairs against a signature nest.

    A column fits its spec when its shape matches the spec's as is, or after the column's
    leading (time) dimension: a signature may describe one step (Reverb's convention for
    tables filled by the legacy `Writer` and read by `TimestepDataset`) or a whole item.

    Raises:
      SignatureMismatchError: the number of columns, a dtype or a shape differs; the message
        names the table, the column's path in the nest and both specs.
    """
    paths_and_specs = tree.flatten_with_path(signature)
    if len(paths_and_specs) != len(columns):
        raise errors.SignatureMismatchError(
            f"table {table!r}: the data has {len(columns)} columns but the signature has "
            f"{len(paths_and_specs)} leaves ({[p for p, _ in paths_and_specs]}); write data with the "
            "table's structure"
        )
    for (path, spec), (shape, dtype) in zip(paths_and_specs, columns):
        dtype = parse_dtype(dtype, f"table {table!r}: column {path or '(root)'} dtype")
        shape = tuple(shape)
        if not (spec.is_compatible_with(shape, dtype)
                or (shape and spec.is_compatible_with(shape[1:], dtype))):
            raise errors.SignatureMismatchError(
                f"table {table!r}: column {path or '(root)'} has shape {shape} and dtype "
                f"{dtype.name}, but the signature expects shape {spec.shape} (of the whole "
                f"column or of one step) and dtype {spec.dtype.name}"
            )


FITS_WHOLE = 1  # the column's shape fits its spec as is (the spec describes the whole column)
FITS_STEP = 2  # the column's shape after its leading (time) dimension fits (the spec describes a step)


def column_fits(signature: Any, columns: list, table: str) -> Tuple[int, ...]:
    """How each flat column (shape, dtype) fits its spec: a mask of FITS_WHOLE and FITS_STEP
    (both for a column that fits either way).

    Raises:
      SignatureMismatchError: as `check_flat_columns`, for a column that fits neither way.
    """
    paths_and_specs = tree.flatten_with_path(signature)
    check_flat_columns(signature, columns, table)
    fits = []
    for (_, spec), (shape, dtype) in zip(paths_and_specs, columns):
        shape = tuple(shape)
        whole = spec.is_compatible_with(shape, dtype)
        step = bool(shape) and spec.is_compatible_with(shape[1:], dtype)
        fits.append((FITS_WHOLE if whole else 0) | (FITS_STEP if step else 0))
    return tuple(fits)

