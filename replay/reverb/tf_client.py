"""Reverb's `TFClient` (`replay.reverb`): insert, sample and update priorities as TF ops.

The ops run the `replay.reverb.Client` calls through `tf.numpy_function`, so they work eagerly,
inside `tf.function` and in graph mode (TF1 sessions); they are not serializable into a
SavedModel graph (the call needs the Python client). They fail with the tf.errors class of the
server's status code, as Reverb's C++ ops do, in graphs too (`replay.dataset_errors`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf
import tree

from replay import errors
from replay.dataset_errors import numpy_function_with_codes
from replay.replay_sample import ReplaySample, SampleInfo


class TFClient:
    """TensorFlow ops over a replay server at `server_address`."""

    def __init__(self, server_address: str, shared_name: Optional[str] = None, name: str = "reverb"):
        del shared_name
        from replay.reverb.client import Client

        self._name = name
        self._server_address = server_address
        self._client = Client(server_address)

    @property
    def server_address(self) -> str:
        return self._server_address

    def sample(self, table: str, data_dtypes, name: Optional[str] = None) -> ReplaySample:
        """An op sampling one item of `table` and giving its first timestep (as Reverb's op does;
        an item written by `insert` has one); data is nested as `data_dtypes`.

        Raises (when run), as tf.errors of the op: NotFoundError for an unknown table (the
        server's errors keep their codes), InvalidArgumentError for a number of columns other
        than `data_dtypes` has, InternalError for a column of another dtype (as Reverb's op).
        """
        flat_dtypes = [tf.as_dtype(d) for d in tree.flatten(data_dtypes)]
        info_dtypes = list(SampleInfo.tf_dtypes())

        def sample(table_name):
            table_name = table_name.decode() if isinstance(table_name, bytes) else str(table_name)
            # As Reverb's op: one item is sampled and its first timestep returned.
            samples = self._client.sample(table_name, 1, emit_timesteps=True)
            try:
                sample = next(samples)[0]  # the item's timesteps, first one
            except errors.ReplayError as exc:
                raise _as_tf_error(exc) from exc
            finally:
                samples.close()
            columns = list(sample.data)
            if len(columns) != len(flat_dtypes):
                raise tf.errors.InvalidArgumentError(
                    None, None, f"the sampled item has {len(columns)} columns but data_dtypes has "
                    f"{len(flat_dtypes)}")
            for i, (column, dtype) in enumerate(zip(columns, flat_dtypes)):
                column = np.asarray(column)
                if dtype == tf.string and column.dtype.kind in "OSU":
                    continue
                if column.dtype != dtype.as_numpy_dtype:
                    raise tf.errors.InternalError(
                        None, None, f"column {i} of the sampled item has dtype "
                        f"{tf.as_dtype(column.dtype).name}, but data_dtypes gives "
                        f"{dtype.name}; ask for the dtype the table holds")
            info = [np.asarray(v, d.as_numpy_dtype) for v, d in zip(sample.info, info_dtypes)]
            data = [np.asarray(c, d.as_numpy_dtype) for c, d in zip(columns, flat_dtypes)]
            return info + data

        with tf.name_scope(name or f"{self._name}_sample"):
            outputs = numpy_function_with_codes(sample, [table], info_dtypes + flat_dtypes)
        info = SampleInfo(*[tf.ensure_shape(t, []) for t in outputs[:len(info_dtypes)]])
        return ReplaySample(info=info, data=tree.unflatten_as(data_dtypes, list(outputs[len(info_dtypes):])))

    def insert(self, data, tables: tf.Tensor, priorities: tf.Tensor, name: Optional[str] = None):
        """An op inserting `data` (a list of tensors, one step) into `tables[i]` with `priorities[i]`.

        Raises:
          ValueError: tables not a rank-1 string tensor, priorities not a rank-1 float64 tensor,
          or their shapes differ.
          When run, as tf.errors of the op: InvalidArgumentError for tables and priorities of
          different lengths or a bad priority, NotFoundError for an unknown table.
        """
        if tables.dtype != tf.string or tables.shape.rank != 1:
            raise ValueError("tables must be a string tensor of rank 1")
        if priorities.dtype != tf.float64 or priorities.shape.rank != 1:
            raise ValueError("priorities must be a float64 tensor of rank 1")
        if not tables.shape.is_compatible_with(priorities.shape):
            raise ValueError("priorities and tables must have the same shape")
        data = list(data)

        def insert(table_names, priority_values, *columns):
            names = [t.decode() if isinstance(t, bytes) else str(t) for t in table_names]
            if len(names) != len(priority_values):
                raise tf.errors.InvalidArgumentError(
                    None, None, "tables and priorities must have the same length")
            try:
                self._client.insert(list(columns), dict(zip(names, (float(p) for p in priority_values))))
            except errors.ReplayError as exc:
                raise _as_tf_error(exc) from exc
            return np.zeros((), np.int32)

        with tf.name_scope(name or f"{self._name}_insert"):
            done = numpy_function_with_codes(insert, [tables, priorities] + data, [tf.int32])
            return tf.group(done)

    def update_priorities(self, table: str, keys: tf.Tensor, priorities: tf.Tensor,
                          name: Optional[str] = None):
        """An op setting the priorities of items `keys` of `table` (unknown keys are ignored).

        Raises (when run), as tf.errors of the op: InvalidArgumentError for a bad priority or keys
        and priorities of different lengths, NotFoundError for an unknown table.
        """
        def update(table_name, key_values, priority_values):
            table_name = table_name.decode() if isinstance(table_name, bytes) else str(table_name)
            if len(key_values) != len(priority_values):
                raise tf.errors.InvalidArgumentError(
                    None, None, f"keys ({len(key_values)}) and priorities ({len(priority_values)}) "
                    "must have the same length")
            try:
                self._client.mutate_priorities(
                    table_name, updates={int(k): float(p) for k, p in zip(key_values, priority_values)})
            except errors.ReplayError as exc:
                raise _as_tf_error(exc) from exc
            return np.zeros((), np.int32)

        with tf.name_scope(name or f"{self._name}_update_priorities"):
            done = numpy_function_with_codes(update, [table, keys, priorities], [tf.int32])
            return tf.group(done)


_TF_ERRORS = {
    errors.NotFoundError: tf.errors.NotFoundError,
    errors.InvalidArgumentError: tf.errors.InvalidArgumentError,
    errors.DeadlineExceededError: tf.errors.DeadlineExceededError,
    errors.ResourceExhaustedError: tf.errors.ResourceExhaustedError,
    errors.FailedPreconditionError: tf.errors.FailedPreconditionError,
    errors.DataLossError: tf.errors.DataLossError,
    errors.UnavailableError: tf.errors.UnavailableError,
    errors.UnauthenticatedError: tf.errors.UnauthenticatedError,
    errors.CancelledError: tf.errors.CancelledError,
}


def _as_tf_error(exc: errors.ReplayError) -> tf.errors.OpError:
    """The tf.errors exception of a replay error's code, which the ops raise (eagerly it reaches
    the caller as it is; in a graph `numpy_function_with_codes` fails the op with its code)."""
    for replay_class in type(exc).__mro__:
        tf_class = _TF_ERRORS.get(replay_class)
        if tf_class is not None:
            return tf_class(None, None, str(exc))
    return tf.errors.UnknownError(None, None, str(exc))
