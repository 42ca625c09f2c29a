"""Wire codec: packed chunk and item batches round-trip, malformed batches are refused."""
import gc
import zlib

import numpy as np
import pytest

from replay import codec, errors
from replay.chunks import Chunk
from replay.items import Item, trajectory_from_chunks
from replay.proto import replay_pb2


def _chunks():
    rng = np.random.default_rng(0)
    return [
        Chunk.from_columns(11, [rng.random((4, 3)).astype(np.float32), np.arange(8).reshape(4, 2),
                                np.array([True, False, True, True])], episode_id=5, start_index=0),
        Chunk.from_columns(12, [np.zeros((2, 3), np.float32), np.ones((2, 2), np.int64),
                                np.array([False, False])], episode_id=5, start_index=4),
        Chunk.from_columns(13, [np.array([b"ab", b"cd"]), np.arange(2 * 2 * 2, dtype=np.int16).reshape(2, 2, 2)],
                           delta_encode=True),
    ]


def _roundtrip_chunks(chunks):
    batch = replay_pb2.ChunkBatch()
    codec.encode_chunks(chunks, batch)
    return codec.decode_chunks(replay_pb2.ChunkBatch.FromString(batch.SerializeToString()))


def test_chunks_round_trip_bit_exactly():
    chunks = _chunks()
    decoded = _roundtrip_chunks(chunks)
    assert [c.key for c in decoded] == [11, 12, 13]
    for original, copy in zip(chunks, decoded):
        assert (copy.episode_id, copy.start_index, copy.length) == (
            original.episode_id, original.start_index, original.length)
        assert copy.columns == original.columns
        for a, b in zip(original.decode(), copy.decode()):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype


def test_items_round_trip_with_state_and_tables():
    chunks = {c.key: c for c in _chunks()}
    first = Item(1, 0.5, trajectory_from_chunks([chunks[11], chunks[12]], 3, 2), chunks, times_sampled=3,
                 inserted_at=123.5)
    second = Item(2, 2.0, ((True, ((13, 1, 1, 0),)),), chunks)
    batch = replay_pb2.ItemBatch()
    codec.encode_items([("a", first), ("b", second)], batch, with_state=True)
    decoded = codec.decode_items(replay_pb2.ItemBatch.FromString(batch.SerializeToString()),
                                codec.resolver(chunks), with_state=True)
    assert [name for name, _ in decoded] == ["a", "b"]
    (_, a), (_, b) = decoded
    assert (a.key, a.priority, a.times_sampled, a.inserted_at) == (1, 0.5, 3, 123.5)
    assert a.trajectory == first.trajectory and b.trajectory == second.trajectory
    np.testing.assert_array_equal(a.decode()[0], np.concatenate([chunks[11].column(0)[3:], chunks[12].column(0)[:1]]))
    assert b.decode()[0] == b"cd"


def test_corrupt_and_truncated_column_bytes_are_data_loss():
    chunk = _chunks()[0]
    column = chunk.columns[0]
    flipped = bytes([column.data[0] ^ 0xFF]) + column.data[1:]
    for bad in (column._replace(data=flipped),
                column._replace(data=column.data[:-3])):
        batch = replay_pb2.ChunkBatch()
        codec.encode_chunks([Chunk(1, [bad] + list(chunk.columns[1:]), chunk.length)], batch)
        with pytest.raises(errors.DataLossError, match="chunk 1 column 0"):
            codec.decode_chunks(batch)


def _writer_chunks(count, num_columns):
    """Chunks of one writer's layout (every chunk the same uncompressed columns), as a writer
    sends them many to a message."""
    chunks = []
    for i in range(count):
        columns = [np.full((2, 3), i, np.float32), np.arange(2, dtype=np.int64) + i][:num_columns]
        chunks.append(Chunk.from_columns(100 + i, columns, episode_id=7, start_index=2 * i, compress=False))
    return chunks


@pytest.mark.parametrize("num_columns", [1, 2])
def test_a_batch_of_one_layout_decodes_as_each_chunk_alone(num_columns):
    chunks = _writer_chunks(6, num_columns)
    together = _roundtrip_chunks(chunks)
    alone = [_roundtrip_chunks([chunk])[0] for chunk in chunks]
    for original, a, b in zip(chunks, together, alone):
        fields = [(c.key, c.episode_id, c.start_index, c.length, c.nbytes, c.columns) for c in (original, a, b)]
        assert fields[0] == fields[1] == fields[2]
        assert a.num_columns == b.num_columns == original.num_columns == num_columns
        a.validate()
        np.testing.assert_array_equal(a.column(0), original.column(0))
        assert a.step_records()[1] == original.step_records()[1]


def test_a_writers_one_column_chunks_are_one_object_each_until_read():
    # the server decodes one chunk per step it is sent; its columns are built on first read
    batch = replay_pb2.ChunkBatch()
    codec.encode_chunks([Chunk.from_columns(key, [np.full((1, 100), key, np.float32)], compress=False)
                        for key in range(1, 2001)], batch)
    gc.collect()
    before = len(gc.get_objects())
    chunks = codec.decode_chunks(batch)
    added = len(gc.get_objects()) - before
    assert len(chunks) == 2000 and added < 2100, f"{added} tracked objects for 2000 chunks"
    assert [chunk.num_columns for chunk in chunks[:3]] == [1, 1, 1]
    assert chunks[6].columns[0].shape == (100,) and chunks[6].columns is chunks[6].columns
    np.testing.assert_array_equal(chunks[6].column(0), np.full((1, 100), 7, np.float32))


def _damage(batch, how):
    """Damages chunk 103 (the fourth) of a batch of `_writer_chunks(6, 2)`."""
    if how == "flipped byte":
        data = batch.column_data[6]
        batch.column_data[6] = bytes([data[0] ^ 0xFF]) + data[1:]
    elif how == "truncated, checksum matching":
        batch.column_data[6] = batch.column_data[6][:-4]
        batch.crc32[6] = zlib.crc32(batch.column_data[6])
    elif how == "no steps":
        batch.lengths[3] = 0
    elif how == "other shape":
        batch.shape_dims[3] = 4  # one dim per chunk (its first column's): (3,) -> (4,)
    return batch


@pytest.mark.parametrize("how, error, match", [
    ("flipped byte", errors.DataLossError, "chunk 103 column 0: stored bytes do not match their checksum"),
    ("truncated, checksum matching", errors.DataLossError, "chunk 103 column 0: holds 20 bytes"),
    ("no steps", errors.InvalidArgumentError, "chunk 103: needs at least one step"),
    ("other shape", errors.DataLossError, "chunk 103 column 0: holds 24 bytes"),
])
def test_one_bad_chunk_among_a_writers_chunks_is_named(how, error, match):
    batch = replay_pb2.ChunkBatch()
    codec.encode_chunks(_writer_chunks(6, 2), batch)
    with pytest.raises(error, match=match):
        codec.decode_chunks(_damage(batch, how))


@pytest.mark.parametrize("num_columns", [1, 2])
def test_a_writers_item_batch_decodes_to_items_of_their_chunks(num_columns):
    chunks = {c.key: c for c in _writer_chunks(4, num_columns)}
    originals = [Item(500 + i, float(i), trajectory_from_chunks([chunk], i % 2, 1), {chunk.key: chunk})
                 for i, chunk in enumerate(chunks.values())]
    first = chunks[100]
    originals.append(Item(9, 2.5, trajectory_from_chunks([first], 0, 2), {first.key: first}))
    if num_columns == 2:  # columns from two chunks: the general path
        mixed = ((False, ((100, 0, 1, 0),)), (False, ((101, 1, 1, 1),)))
        originals.append(Item(10, 1.0, mixed, {100: first, 101: chunks[101]}))
    else:  # a squeezed column (one step, no time dimension)
        originals.append(Item(11, 1.0, ((True, ((101, 1, 1, 0),)),), {101: chunks[101]}))
    batch = replay_pb2.ItemBatch()
    codec.encode_items([("t" if i % 3 else "u", item) for i, item in enumerate(originals)], batch)
    batch = replay_pb2.ItemBatch.FromString(batch.SerializeToString())
    decoded = codec.decode_items(batch, codec.resolver(chunks))
    assert [(name, i.key, i.priority, i.trajectory, i.chunks, i.times_sampled) for name, i in decoded] == [
        ("t" if i % 3 else "u", o.key, o.priority, o.trajectory, o.chunks, 0) for i, o in enumerate(originals)]
    # items of one chunk share it (span items hold it, others share one mapping)
    assert decoded[0][1].span_chunk is decoded[4][1].span_chunk is first
    assert decoded[0][1].chunks[100] is decoded[4][1].chunks[100] is first
    spans = [item.span for _, item in decoded]  # worked out by the decoder or on first use
    assert spans == [Item(o.key, o.priority, o.trajectory, o.chunks).span for o in originals]
    assert spans[-1] == (None if num_columns == 2 else (101, 1, 1, 1))
    del chunks[102]
    with pytest.raises(errors.NotFoundError, match="chunk 102"):
        codec.decode_items(batch, codec.resolver(chunks))


def test_malformed_batches_name_the_field():
    batch = replay_pb2.ChunkBatch()
    codec.encode_chunks(_chunks()[:1], batch)
    del batch.crc32[-1]
    with pytest.raises(errors.InvalidArgumentError, match="crc32"):
        codec.decode_chunks(batch)
    items = replay_pb2.ItemBatch(tables=["t"], table_index=[0, 3], keys=[1, 2], priorities=[1, 1],
                                 num_columns=[1, 1], squeeze=[False, False], num_slices=[1, 1],
                                 slice_chunk_keys=[11, 11], slice_offsets=[0, 0], slice_lengths=[1, 1],
                                 slice_indices=[0, 0])
    with pytest.raises(errors.InvalidArgumentError, match="table index"):
        codec.decode_items(items, codec.resolver({}))


def test_item_referencing_an_unknown_chunk_is_not_found():
    items = replay_pb2.ItemBatch(tables=["t"], table_index=[0], keys=[1], priorities=[1], num_columns=[1],
                                 squeeze=[False], num_slices=[1], slice_chunk_keys=[99], slice_offsets=[0],
                                 slice_lengths=[1], slice_indices=[0])
    with pytest.raises(errors.NotFoundError, match="chunk 99"):
        codec.decode_items(items, codec.resolver({}))


def test_decoded_items_add_almost_nothing_for_the_garbage_collector():
    # A table of step items lives in the learner's process; every object of it the cyclic
    # collector tracks makes each full collection slower (0.3-0.5 s at 50k items with per-slice
    # objects). Decoded trajectories are plain tuples, which the collector stops tracking.
    chunk = Chunk.from_columns(1, [np.zeros((16, 4), np.float32), np.arange(16), np.zeros(16, bool)])
    rows = [("t", key, 1.0, [(True, ((1, key % 16, 1, c),)) for c in range(3)]) for key in range(2000)]
    batch = replay_pb2.ItemBatch()
    codec.encode_item_rows(rows, batch)
    gc.collect()
    before = len(gc.get_objects())
    items = codec.decode_items(batch, codec.resolver({1: chunk}))
    gc.collect()
    added = len(gc.get_objects()) - before
    assert len(items) == 2000
    assert added < 2 * len(items), f"{added} tracked objects for {len(items)} items"
    trajectory = items[0][1].trajectory  # built on first read, then left untracked
    for _ in range(4):  # each collection untracks one more level of nested tuples
        gc.collect()
    assert not gc.is_tracked(trajectory)
    assert all(item.span_chunk is chunk for _, item in items)  # each holds the chunk, no mapping
    assert items[0][1].chunks == {1: chunk}
    assert [int(item.decode()[1]) for _, item in items[:20]] == [k % 16 for k in range(20)]
