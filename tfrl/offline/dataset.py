"""offline_dataset: recorded TFRecord files as a tf.data pipeline for a learner.

The direct path from files to a learner, without rollout workers: the files are read in
parallel (`interleave` over files, `num_parallel_reads` at a time), each record is parsed with
`tf.io.parse_single_example` and its raw columns decoded with `tf.io.decode_raw` in the graph
(lz4 columns with the replay column codec, one call per record, never per row), records are
split into rows, rows shuffled in a buffer, batched and prefetched. The column layout is read
from the first record (batch_record.py); every file must share it. The elements are dicts
column -> [batch_size, ...] tensors, ready for `strategy.experimental_distribute_dataset`
(MirroredStrategy) or a policy's `learn_on_batch`.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from tfrl import errors
from tfrl.offline import batch_record
from tfrl.offline.input_reader import resolve_input_files


def offline_dataset(files: Union[str, Sequence[str]], batch_size: int,
                    columns: Optional[Sequence[str]] = None, shuffle_buffer_size: int = 10_000,
                    num_parallel_reads: int = 4, repeat: bool = True,
                    seed: Optional[int] = None, drop_remainder: bool = True):
    """A tf.data.Dataset of row batches from recorded TFRecord files.

    Args:
      files: what `input` accepts (a directory, glob, file or list); JSON files are not read.
      batch_size: rows per element.
      columns: the columns to read (default: all of the first record's).
      shuffle_buffer_size: rows shuffled together (0: file order within each reader).
      num_parallel_reads: files read at once (interleaved).
      repeat: cycle over the files forever.
      seed: seeds the file order and the shuffle.
      drop_remainder: drop a last partial batch (keeps shapes static for tf.function).

    Raises:
      NoInputFilesError: no TFRecord files match.
      CorruptRecordError: the first record is unreadable (damage later in the files surfaces
        as tf.errors.DataLossError while iterating).
      InvalidBatchError: a requested column the records do not have.
    """
    import tensorflow as tf

    from tfrl.utils.tf_data import without_autotuning

    paths = [p for p in resolve_input_files(files) if not p.endswith(".json")]
    if not paths:
        raise errors.NoInputFilesError(f"input {files!r} names no TFRecord files")
    first = next(iter(without_autotuning(tf.data.TFRecordDataset(paths[0]).take(1))), None)
    if first is None:
        raise errors.NoInputFilesError(f"{paths[0]} holds no records")
    layout = {entry["name"]: entry for entry in batch_record.column_layout(first.numpy())}
    names = list(columns) if columns is not None else list(layout)
    missing = [name for name in names if name not in layout]
    if missing:
        raise errors.InvalidBatchError(
            f"the recorded batches have no column(s) {missing}; they have {sorted(layout)}")

    features = {batch_record.COUNT_KEY: tf.io.FixedLenFeature([], tf.int64)}
    for name in names:
        features[batch_record.COLUMN_PREFIX + name] = tf.io.FixedLenFeature([], tf.string)

    def decode_compressed(data, count, dtype, shape):
        from replay import chunks

        column = chunks.ColumnData(dtype=dtype, shape=tuple(shape), data=bytes(data),
                                   compressed=True, delta_encoded=False, crc32=0)
        return np.array(chunks.decode_column(column, int(count)))

    def parse(record):
        parsed = tf.io.parse_single_example(record, features)
        count = parsed[batch_record.COUNT_KEY]
        out = {}
        for name in names:
            entry = layout[name]
            dtype = np.dtype(entry["dtype"])
            shape = [int(d) for d in entry["shape"]]
            data = parsed[batch_record.COLUMN_PREFIX + name]
            if entry["compressed"]:
                column = tf.numpy_function(
                    lambda d, c, dt=entry["dtype"], s=tuple(shape): decode_compressed(d, c, dt, s),
                    [data, count], tf.as_dtype(dtype))
            else:
                column = tf.io.decode_raw(data, tf.as_dtype(dtype))
            out[name] = tf.reshape(column, tf.concat([[count], tf.constant(shape, tf.int64)], 0))
        return out

    file_dataset = tf.data.Dataset.from_tensor_slices(paths)
    if shuffle_buffer_size:
        file_dataset = file_dataset.shuffle(len(paths), seed=seed)
    if repeat:
        file_dataset = file_dataset.repeat()
    dataset = file_dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(num_parallel_reads, len(paths)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.unbatch()
    if shuffle_buffer_size:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
