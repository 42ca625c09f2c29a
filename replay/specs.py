"""Tensor specs without TensorFlow: the shape/dtype contract of table signatures.

A table signature is a dm-tree nest of `TensorSpec`s. The replay core checks inserted data
against it; `replay.dataset` converts to and from `tf.TensorSpec` (anything with `.shape` and
`.dtype` is accepted by `TensorSpec.from_spec`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

import numpy as np
import tree

from replay import errors

Shape = Tuple[Optional[int], ...]


def _as_numpy_dtype(dtype: Any) -> np.dtype:
    # tf.DType exposes the numpy dtype as `as_numpy_dtype`; strings and numpy types go straight in.
    dtype = getattr(dtype, "as_numpy_dtype", dtype)
    return np.dtype(dtype)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Shape (None for any size of a dimension) and dtype of one leaf."""

    shape: Shape
    dtype: np.dtype
    name: Optional[str] = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(None if d is None else int(d) for d in self.shape))
        object.__setattr__(self, "dtype", _as_numpy_dtype(self.dtype))

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
        return cls(tuple(d["shape"]), np.dtype(d["dtype"]), d.get("name"))


def as_signature(signature: Any) -> Any:
    """Converts a nest of tf/numpy-like specs into a nest of `TensorSpec` (None stays None)."""
    if signature is None:
        return None
    return tree.map_structure(TensorSpec.from_spec, signature)


def check_flat_columns(signature: Any, columns: list, table: str) -> None:
    """Checks flat column (shape, dtype) pairs against a signature nest.

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
        if not spec.is_compatible_with(tuple(shape), np.dtype(dtype)):
            raise errors.SignatureMismatchError(
                f"table {table!r}: column {path or '(root)'} has shape {tuple(shape)} and dtype "
                f"{np.dtype(dtype).name}, but the signature expects shape {spec.shape} and dtype "
                f"{spec.dtype.name}"
            )
