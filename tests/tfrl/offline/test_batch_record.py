"""The record layout of one batch: columns round-trip bit for bit, the large ones go through the
replay column codec's lz4, and damaged bytes are refused with a named error, never guessed at."""
import numpy as np
import pytest

from tfrl.errors import CorruptRecordError, InvalidBatchError
from tfrl.offline import batch_record
from tfrl.policy.sample_batch import SampleBatch


def frames_batch(rows=32):
    rng = np.random.default_rng(0)
    frames = np.zeros((rows, 42, 42, 1), np.uint8)
    frames[:, 10:20, 10:20] = rng.integers(0, 255, (rows, 10, 10, 1), dtype=np.uint8)
    return SampleBatch({"obs": frames, "new_obs": frames[::-1].copy(),
                        "actions": rng.integers(0, 6, rows), "rewards": rng.random(rows, np.float32),
                        "terminateds": np.arange(rows) == rows - 1,
                        "infos": np.array([{"lives": 3}] * rows, dtype=object)})


def test_columns_round_trip_and_image_columns_are_compressed():
    batch = frames_batch()
    record = batch_record.encode_batch(batch, compress_columns=["obs", "new_obs"],
                                       policy_id="pursuer")
    policy_id, back = batch_record.decode_batch(record)
    assert policy_id == "pursuer"
    assert set(back) == {"obs", "new_obs", "actions", "rewards", "terminateds"}  # infos left out
    for key in back:
        assert back[key].dtype == np.asarray(batch[key]).dtype
        np.testing.assert_array_equal(back[key], batch[key])
    layout = {e["name"]: e for e in batch_record.column_layout(record)}
    assert layout["obs"]["compressed"] and not layout["actions"]["compressed"]
    assert len(record) < batch["obs"].nbytes  # both image columns together, compressed
    raw = batch_record.encode_batch(batch, compress_columns=[])
    assert len(raw) > 2 * batch["obs"].nbytes


def test_a_flipped_byte_in_a_column_is_a_named_error_with_the_place():
    record = bytearray(batch_record.encode_batch(frames_batch(), compress_columns=["obs"]))
    record[len(record) // 2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match=r"data\.tfrecord: the record at byte offset 96") \
            as caught:
        batch_record.decode_batch(bytes(record), "data.tfrecord", 96)
    assert (caught.value.path, caught.value.offset) == ("data.tfrecord", 96)


def test_bytes_that_are_not_a_record_are_a_named_error():
    with pytest.raises(CorruptRecordError, match="not a tfrl sample-batch record"):
        batch_record.decode_batch(b"\x00\x01garbage", "x.tfrecord", 0)


def test_nested_columns_are_refused_with_what_to_do():
    batch = SampleBatch({"obs": {"a": np.zeros((2, 3))}, "actions": np.zeros(2)})
    with pytest.raises(InvalidBatchError, match="flatten Dict/Tuple observations"):
        batch_record.encode_batch(batch)
