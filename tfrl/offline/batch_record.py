"""The record layout of one recorded sample batch: a `tf.train.Example` per batch.

Rollout workers record their sample batches (tfrl/offline/tfrecord_writer.py) and readers turn
records back into batches (tfrecord_reader.py, and the tf.data pipeline of dataset.py). One
record holds one batch of one policy:

  tfrl/format     bytes  b"tfrl-sample-batch-1"
  tfrl/count      int64  rows in the batch
  tfrl/policy_id  bytes  the policy that produced it ("default_policy" for single-agent envs)
  tfrl/columns    bytes  JSON list, one entry per column: {"name", "dtype" (numpy dtype string),
                         "shape" (of one row), "compressed" (lz4 block with its size in front),
                         "crc32" (of the stored bytes)}
  col/<name>      bytes  the column: `count` rows in C order, raw or lz4-compressed

Columns are encoded by the replay service's own column codec (`replay.chunks.encode_column`,
the one its chunks use), so a raw column is `tf.io.decode_raw(col/<name>, dtype)` reshaped to
`[count, *shape]` in a plain tf.data pipeline; only lz4 columns need the codec to decode.
Nothing in a record is ever unpickled.
"""
from __future__ import annotations

import json
import zlib
from typing import Iterable, Tuple

import numpy as np

from replay import chunks as replay_chunks
from replay import errors as replay_errors
from replay import specs as replay_specs
from tfrl import errors
from tfrl.policy.sample_batch import SampleBatch

FORMAT = b"tfrl-sample-batch-1"
FORMAT_KEY = "tfrl/format"
COUNT_KEY = "tfrl/count"
POLICY_KEY = "tfrl/policy_id"
COLUMNS_KEY = "tfrl/columns"
COLUMN_PREFIX = "col/"
DEFAULT_POLICY_ID = "default_policy"


def recordable_columns(batch: SampleBatch) -> Iterable[Tuple[str, np.ndarray]]:
    """(name, array) of every column a record can hold: numeric, bool and fixed-width string
    arrays. Python-object columns (`infos`) are left out.

    Raises:
      InvalidBatchError: a nested column (Dict or Tuple observations), which records cannot
        hold yet.
    """
    for name, value in batch.items():
        if isinstance(value, (dict, list, tuple)):
            raise errors.InvalidBatchError(
                f"column {name!r} is nested ({type(value).__name__}); recorded batches hold "
                "flat array columns only (flatten Dict/Tuple observations with a wrapper)")
        array = np.asarray(value)
        if array.dtype.hasobject or array.ndim == 0:
            continue
        yield name, array


def encode_batch(batch: SampleBatch, compress_columns: Iterable[str] = (),
                 policy_id: str = DEFAULT_POLICY_ID) -> bytes:
    """One serialized tf.train.Example holding `batch` (layout in the module docstring).

    Raises:
      InvalidBatchError: a nested column (see `recordable_columns`).
    """
    import tensorflow as tf

    compress = set(compress_columns)
    layout, feature = [], {}
    for name, array in recordable_columns(batch):
        column = replay_chunks.encode_column(array, compress=name in compress)
        layout.append({"name": name, "dtype": column.dtype, "shape": list(column.shape),
                       "compressed": column.compressed, "crc32": column.crc32})
        feature[COLUMN_PREFIX + name] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[column.data]))
    feature[FORMAT_KEY] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[FORMAT]))
    feature[COUNT_KEY] = tf.train.Feature(int64_list=tf.train.Int64List(value=[batch.count]))
    feature[POLICY_KEY] = tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[policy_id.encode()]))
    feature[COLUMNS_KEY] = tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[json.dumps(layout).encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def column_layout(record: bytes) -> list:
    """The `tfrl/columns` entries of one record (to build a tf.data parser from the first).

    Raises:
      CorruptRecordError: the bytes are not a record of this layout.
    """
    return _parse(record, "record", -1)[2]


def decode_batch(record: bytes, path: str = "record", offset: int = -1
                 ) -> Tuple[str, SampleBatch]:
    """(policy_id, SampleBatch) of one record written by `encode_batch`.

    Raises:
      CorruptRecordError: the record is not of this layout, or a column's bytes do not match
        its checksum, size or codec; the message names `path` and `offset`.
    """
    example, count, layout, policy_id = _parse(record, path, offset)
    feature = example.features.feature
    columns = {}
    for entry in layout:
        name = entry["name"]
        try:
            data = feature[COLUMN_PREFIX + name].bytes_list.value[0]
            if zlib.crc32(data) != int(entry["crc32"]):
                raise ValueError("checksum mismatch")
            stored = replay_chunks.ColumnData(
                dtype=replay_specs.parse_dtype(entry["dtype"]).str,
                shape=tuple(int(d) for d in entry["shape"]), data=data,
                compressed=bool(entry["compressed"]), delta_encoded=False, crc32=int(entry["crc32"]))
            columns[name] = np.array(replay_chunks.decode_column(stored, count))
        except (KeyError, IndexError, ValueError, TypeError, replay_errors.ReplayError) as exc:
            raise _corrupt(path, offset, f"column {name!r} is unreadable ({exc})") from None
    return policy_id, SampleBatch(columns)


def _parse(record: bytes, path: str, offset: int):
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    try:
        example = tf.train.Example.FromString(record)
        feature = example.features.feature
        if feature[FORMAT_KEY].bytes_list.value[0] != FORMAT:
            raise ValueError(f"format {feature[FORMAT_KEY].bytes_list.value[0]!r}")
        count = int(feature[COUNT_KEY].int64_list.value[0])
        policy_id = feature[POLICY_KEY].bytes_list.value[0].decode()
        layout = json.loads(feature[COLUMNS_KEY].bytes_list.value[0])
        if not isinstance(layout, list) or not all(isinstance(e, dict) for e in layout):
            raise ValueError("malformed column list")
    except (DecodeError, KeyError, IndexError, ValueError, UnicodeDecodeError) as exc:
        raise _corrupt(path, offset, f"not a tfrl sample-batch record ({exc})") from None
    return example, count, layout, policy_id


def _corrupt(path: str, offset: int, what: str) -> errors.CorruptRecordError:
    return errors.CorruptRecordError(
        f"{path}: the record at byte offset {offset} is corrupted: {what}. Re-record the file, "
        "or set input_skip_corrupt: True to skip the rest of it", path=path, offset=offset)
