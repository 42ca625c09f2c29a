"""TFRecordWriter: the native `output` format, one tf.train.Example record per batch.

The record layout is batch_record.py's; the file framing is TensorFlow's TFRecord (length,
CRC32C of the length, data, CRC32C of the data), so `tf.data.TFRecordDataset` reads the files
and a damaged record is detected by its checksum. See output_writer.py for rotation and names.
"""
from __future__ import annotations

from typing import Iterable

from tfrl.offline.batch_record import encode_batch
from tfrl.offline.output_writer import OutputWriter
from tfrl.policy.sample_batch import SampleBatch

# TFRecord framing around each record: u64 length, u32 CRC of the length, u32 CRC of the data
RECORD_OVERHEAD_BYTES = 16


class TFRecordWriter(OutputWriter):
    """Writes `output-..._worker-<i>_<n>.tfrecord` files; `compress_columns` are stored
    lz4-compressed (the replay column codec)."""

    extension = "tfrecord"

    def __init__(self, directory: str, worker_index: int = 0,
                 max_file_size: int = 64 * 1024 * 1024,
                 compress_columns: Iterable[str] = (SampleBatch.OBS, SampleBatch.NEXT_OBS)):
        super().__init__(directory, worker_index, max_file_size)
        self.compress_columns = tuple(compress_columns)
        self._file = None

    def _open_file(self, path: str) -> None:
        import tensorflow as tf

        self._file = tf.io.TFRecordWriter(path)

    def _write_policy_batch(self, batch: SampleBatch, policy_id: str) -> int:
        record = encode_batch(batch, self.compress_columns, policy_id)
        self._file.write(record)
        self._file.flush()  # readable while the run goes on, and nothing lost if it dies
        return len(record) + RECORD_OVERHEAD_BYTES

    def _close_file(self) -> None:
        self._file.close()
        self._file = None
