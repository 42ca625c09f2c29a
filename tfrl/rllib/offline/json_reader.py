"""Classic `ray.rllib.offline.json_reader`: `JsonReader(inputs, ioctx=None)` over tfrl's file
input (tfrl/offline/input_reader.py), reading classic JSON lines and tfrl's own recordings.

`next()` returns the next recorded batch, cycling through the files. `tf_input_ops()` gives the
batches as tensors for a model's custom loss (classic RLlib's imitation-loss example): classic
RLlib fed a TF1 queue from a thread; here each column is a `tf.numpy_function` output, so every
run of the traced learn step that uses them reads the next batch, as each session run dequeued
one.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import numpy as np
import tensorflow as tf

from tfrl.errors import InvalidBatchError
from tfrl.offline.input_reader import FileInput, resolve_input_files
from tfrl.policy.sample_batch import SampleBatch


class JsonReader:
    """Reads the batches of recorded files: a directory, a glob, a file or a list of them.

    Raises:
      NoInputFilesError: `inputs` names no experience file.
    """

    def __init__(self, inputs: Union[str, List[str]], ioctx: Optional[Any] = None):
        self.ioctx = ioctx
        self.files = resolve_input_files(inputs)
        self._input = FileInput(self.files)

    def next(self):
        """The next recorded batch (SampleBatch, or MultiAgentBatch for a multi-agent file).

        Raises:
          CorruptRecordError: a damaged line (the message names the file and offset).
          UnsupportedRecordError: a classic column packed with pickle.
        """
        return self._input.next()

    def tf_input_ops(self, queue_size: int = 1) -> Dict[str, tf.Tensor]:
        """{column: tensor} of the next recorded batch, read anew each time the graph that holds
        them runs (module docstring). The columns are those of the first batch that are
        numeric (`infos` is left out); `queue_size` is classic's queue depth, unused here.

        Raises:
          CorruptRecordError, UnsupportedRecordError: see `next()`, when the first batch is read.
          InvalidBatchError (when the graph runs): a later batch lacks a column of the first.
        """
        first = self._numeric_columns(self.next())
        names = sorted(first)
        dtypes = [tf.as_dtype(first[name].dtype) for name in names]
        pending = [first]

        def read_next():
            columns = pending.pop() if pending else self._numeric_columns(self.next())
            missing = [name for name in names if name not in columns]
            if missing:
                raise InvalidBatchError(
                    f"a batch of {self.files} lacks column(s) {missing} that the first batch "
                    "had; tf_input_ops needs files with the same columns in every batch")
            return [columns[name] for name in names]

        tensors = tf.numpy_function(read_next, [], dtypes, stateful=True,
                                    name="json_reader_input")
        out = {}
        for name, tensor in zip(names, tensors):
            tensor.set_shape([None, *first[name].shape[1:]])
            out[name] = tensor
        return out

    @staticmethod
    def _numeric_columns(batch) -> Dict[str, np.ndarray]:
        return {name: np.asarray(value) for name, value in batch.items()
                if name != SampleBatch.INFOS and np.asarray(value).dtype.kind in "biuf"}


__all__ = ["JsonReader"]
