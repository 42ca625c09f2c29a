"""The check of what a dataset requests from a table against the table's signature.

Used by the dataset's streams (`replay.sample_streams.BlockStream`) as each opens, so that a
dataset which does not fit the table fails at once with what to change, rather than at its
first sample (or never, on an empty table); with datasets of steps, also on each block. The
messages are Reverb's.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import tensorflow as tf
import tree

from replay import errors, specs
from replay.table_info import TableInfo


def _shape_text(shape: tf.TensorShape) -> str:
    return specs.tf_shape_text(None if shape.rank is None else shape.as_list())


class SignatureCheck:
    """What a dataset requests from a table, checked against the table's signature (when it has
    one) as a stream opens, so that a dataset which does not fit the table fails at once with
    what to change, rather than at its first sample (or never, on an empty table).

    An item's shape fits a signature leaf when it is the leaf's shape or the leaf's shape with a
    leading time dimension (a signature may describe one step). With `step_shapes` (datasets
    that yield the steps of items), each step's shape must fit the leaf's shape."""

    def __init__(self, table: str, flat_dtypes: List[np.dtype], flat_shapes: List[tf.TensorShape],
                 step_shapes: Optional[List[tf.TensorShape]] = None):
        self.table = table
        self.flat_dtypes = flat_dtypes
        self.flat_shapes = flat_shapes
        self.step_shapes = step_shapes

    def __call__(self, table_info: Optional[TableInfo]) -> None:
        """Raises InvalidArgumentError when the request does not fit the signature of the table
        `table_info` describes; None (an unreachable server or unknown table) is left to the
        stream to report."""
        signature = None if table_info is None else table_info.signature
        if not signature:
            return
        paths_and_leaves = tree.flatten_with_path(signature)
        leaves = [leaf for _, leaf in paths_and_leaves]
        if len(leaves) != len(self.flat_dtypes):
            raise errors.InvalidArgumentError(
                f"Inconsistent number of tensors requested from table '{self.table}'.  Requested "
                f"{len(self.flat_dtypes)} tensors, but table signature shows {len(leaves)} tensors.  "
                "Pass dtypes and shapes with the structure of the table's signature, or build the "
                "dataset with from_table_signature.")
        requested_shapes = self.step_shapes if self.step_shapes is not None else self.flat_shapes
        for index, ((path, spec), dtype, requested) in enumerate(
                zip(paths_and_leaves, self.flat_dtypes, requested_shapes)):
            step = tf.TensorShape(spec.shape)
            if self.step_shapes is not None:
                fits = requested.is_compatible_with(step)
            else:
                fits = (requested.is_compatible_with(step)
                        or requested.is_compatible_with(tf.TensorShape([None]).concatenate(step)))
            if np.dtype(spec.dtype) != np.dtype(dtype) or not fits:
                raise errors.InvalidArgumentError(
                    f"Requested incompatible tensor at flattened index {index} from table "
                    f"'{self.table}'.  Requested (dtype, shape): ({specs.tf_dtype_name(dtype)}, "
                    f"{_shape_text(requested)}).  Signature (dtype, shape): ({specs.tf_dtype_name(spec.dtype)}, "
                    f"{_shape_text(step)}) at {'/'.join(map(str, path)) or 'the root'}.  Pass a dtype "
                    "and shape that fit the table's signature, or build the dataset with "
                    "from_table_signature.")
    def check_steps(self, columns: List[np.ndarray]) -> None:
        """With `step_shapes`: raises InvalidArgumentError when a block's items (columns of
        [N, ...] arrays) do not have steps of those shapes (each item is a sequence of steps, or
        one step)."""
        if self.step_shapes is None:
            return
        for column, dtype, step in zip(columns, self.flat_dtypes, self.step_shapes):
            item_shape = column.shape[1:]
            if step.is_compatible_with(item_shape):  # an item of one step (inserted whole)
                continue
            steps = item_shape[1:] if item_shape else item_shape
            if not step.is_compatible_with(steps):
                raise errors.InvalidArgumentError(
                    f"Specification has (dtype, shape): ({specs.tf_dtype_name(dtype)}, {_shape_text(step)}).  "
                    f"Tensor has (dtype, shape): ({specs.tf_dtype_name(column.dtype)}, "
                    f"{_shape_text(tf.TensorShape(steps))}).  The items of table '{self.table}' have "
                    "steps of another shape: pass the shape of one of their steps.")
