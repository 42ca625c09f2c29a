"""TFRecord input files: the batches of one file written by TFRecordWriter, in order.

`read_tfrecord_file` walks a file record by record through `tf.data.TFRecordDataset` (which
checks every record's CRC32C) and decodes each record with batch_record.py. The byte offset of
every record is known (each is its length plus 16 bytes of framing), so a truncated or
corrupted record raises `CorruptRecordError` naming the file and that offset; the batches
before it have already been handed out.
"""
from __future__ import annotations

from typing import Iterator

from tfrl import errors
from tfrl.offline.batch_record import DEFAULT_POLICY_ID, decode_batch
from tfrl.offline.tfrecord_writer import RECORD_OVERHEAD_BYTES


def read_tfrecord_file(path: str) -> Iterator:
    """Yields the file's batches: SampleBatch for the default policy, else a MultiAgentBatch
    holding the one policy's batch.

    Raises:
      CorruptRecordError: a truncated record, a checksum mismatch or a record that is not a
        tfrl sample batch; the message names `path` and the record's byte offset.
      OSError: the file cannot be opened.
    """
    import tensorflow as tf

    from tfrl.policy.sample_batch import MultiAgentBatch
    from tfrl.utils.tf_data import without_autotuning

    offset = 0
    iterator = iter(without_autotuning(tf.data.TFRecordDataset(path)))
    while True:
        try:
            record = next(iterator).numpy()
        except StopIteration:
            return
        except tf.errors.DataLossError as exc:
            raise errors.CorruptRecordError(
                f"{path}: the record at byte offset {offset} is truncated or corrupted "
                f"({exc.message.splitlines()[0]}). Re-record the file, or set "
                "input_skip_corrupt: True to skip the rest of it", path=path,
                offset=offset) from None
        except tf.errors.NotFoundError as exc:
            raise FileNotFoundError(f"{path}: {exc.message}") from None
        policy_id, batch = decode_batch(record, path, offset)
        offset += len(record) + RECORD_OVERHEAD_BYTES
        if policy_id == DEFAULT_POLICY_ID:
            yield batch
        else:
            yield MultiAgentBatch({policy_id: batch}, batch.count)
