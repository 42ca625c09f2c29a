"""The writers' fast paths: packed InsertRequests parse to the message protobuf would build,
item rows encode like Items, and flat-dict steps give the same references, items and errors as
the general dm-tree path."""
import zlib

import numpy as np
import pytest
import tree
from google.protobuf.message import DecodeError

from replay import codec, column_batch, errors, framing
from replay.chunks import Chunk, encode_column
from replay.items import Item
from replay.proto import replay_pb2
from replay.trajectory_columns import CellRef


def _chunks():
    rng = np.random.default_rng(0)
    big = rng.random(40_000 // 4, dtype=np.float32)  # incompressible: stored raw, >127 B sizes
    return [Chunk.from_columns(7, [big[None], np.arange(3)[None]], episode_id=3),
            Chunk.from_columns(8, [np.zeros((2, 300), np.float32), np.ones((2, 1), np.int64)]),
            Chunk.from_columns(9, [np.array([b"xy"])])]


@pytest.mark.parametrize("with_items", [False, True])
def test_packed_insert_request_parses_to_the_plain_message(with_items):
    chunks = _chunks()
    plain = replay_pb2.InsertRequest()
    codec.encode_chunks(chunks, plain.chunks)
    head = replay_pb2.InsertRequest()
    column_data = []
    codec.encode_chunks(chunks, head.chunks, column_data)
    assert not head.chunks.column_data and len(column_data) == 5
    rows = [("t", 1, 0.5, [(True, ((7, 0, 1, 0),)), (False, ((8, 0, 2, 1), (8, 1, 1, 1)))])]
    if with_items:
        for request in (plain, head):
            codec.encode_item_rows(rows, request.items)
            request.release_chunk_keys.extend([4, 5])
    packed = framing.serialize_insert_request(framing.PackedInsertRequest(head, column_data))
    parsed = replay_pb2.InsertRequest.FromString(packed)
    assert parsed == plain
    decoded = codec.decode_chunks(parsed.chunks)  # checksums and sizes still verify
    for original, copy in zip(chunks, decoded):
        assert copy.columns == original.columns
    empty = framing.PackedInsertRequest(replay_pb2.InsertRequest(release_chunk_keys=[1]), [])
    assert replay_pb2.InsertRequest.FromString(framing.serialize_insert_request(empty)) == \
        replay_pb2.InsertRequest(release_chunk_keys=[1])


def test_packed_requests_carry_columns_of_every_size_exactly():
    """The trailing columns' prefixes are cached by length; sizes around the varint byte
    boundaries, empty columns and more distinct sizes than the cache keeps all arrive whole."""
    rng = np.random.default_rng(1)
    sizes = [0, 1, 127, 128, 16_383, 16_384, 5000, 127, 0] + list(range(200, 5200))
    column_data = [rng.bytes(size) for size in sizes]
    head = replay_pb2.InsertRequest(release_chunk_keys=[3])
    parsed = replay_pb2.InsertRequest.FromString(
        framing.serialize_insert_request(framing.PackedInsertRequest(head, column_data)))
    assert list(parsed.chunks.column_data) == column_data
    assert list(parsed.release_chunk_keys) == [3]


@pytest.mark.parametrize("size", [100, 40_000])
def test_the_server_reads_a_packed_insert_request_as_the_plain_message(size):
    """framing.parse_insert_request (the server's deserializer): the message without its column
    bytes, and each column as bytes of its own, whether the columns are large enough to be
    copied out of the received bytes or small enough to be parsed whole; a plain encoding
    reads the same, and bytes that are no InsertRequest raise DecodeError."""
    rng = np.random.default_rng(2)
    column_data = [rng.bytes(size) for _ in range(6)]
    head = replay_pb2.InsertRequest(release_chunk_keys=[3])
    head.chunks.keys.extend([1, 2, 3])
    head.chunks.flags.extend([0] * 6)
    wire = framing.serialize_insert_request(framing.PackedInsertRequest(head, column_data))
    plain = replay_pb2.InsertRequest()
    plain.CopyFrom(head)
    plain.chunks.column_data.extend(column_data)
    for data in (wire, plain.SerializeToString()):
        parsed = framing.parse_insert_request(data)
        assert parsed.request == head and not parsed.request.chunks.column_data
        assert parsed.column_data == column_data
        assert all(type(column) is bytes for column in parsed.column_data)
    with pytest.raises(DecodeError):
        framing.parse_insert_request(b"\x0a\xff\xff\xff")


def _sample_response(chunks, column_data):
    response = replay_pb2.SampleResponse(probabilities=[0.5, 0.25], table_sizes=[2, 2],
                                         priorities=[1.0, 3.0], times_sampled=[1, 4])
    rows = [("t", 1, 1.0, [(True, ((7, 0, 1, 0),))]), ("t", 2, 3.0, [(False, ((8, 0, 2, 0),))])]
    codec.encode_item_rows(rows, response.items)
    codec.encode_chunks(chunks, response.chunks, column_data)
    return response


def test_packed_sample_responses_keep_their_column_bytes_as_views_of_the_message():
    chunks = _chunks()
    column_data = []
    head = _sample_response(chunks, column_data)
    sent = framing.serialize_sample_response(framing.PackedSampleResponse(head, column_data))
    plain = _sample_response(chunks, None)
    assert replay_pb2.SampleResponse.FromString(sent) == plain  # any protobuf parser reads it

    received = framing.parse_sample_response(sent)
    assert received.response == head and not received.response.chunks.column_data
    assert all(isinstance(c, memoryview) and c.obj is sent for c in received.column_data)
    assert [bytes(c) for c in received.column_data] == column_data
    decoded = codec.decode_chunks(received.response.chunks, column_data=received.column_data)
    for original, copy in zip(chunks, decoded):  # checksums and sizes verify on the views
        for a, b in zip(original.decode(), copy.decode()):
            np.testing.assert_array_equal(a, b)


def test_sample_responses_in_another_layout_are_parsed_whole():
    chunks = _chunks()
    plain = _sample_response(chunks, None)
    received = framing.parse_sample_response(plain.SerializeToString())
    assert [bytes(c) for c in received.column_data] == list(plain.chunks.column_data)
    assert not received.response.chunks.column_data
    assert received.response.probabilities == plain.probabilities
    # A trailing chunks occurrence that holds more than column data is not taken as the trailer.
    extra = replay_pb2.SampleResponse()
    extra.chunks.keys.append(99)
    received = framing.parse_sample_response(plain.SerializeToString() + extra.SerializeToString())
    assert list(received.response.chunks.keys) == [7, 8, 9, 99]
    assert len(received.column_data) == 5


def test_sample_responses_of_small_columns_are_parsed_whole():
    # Walking hundreds of tiny columns in Python costs more than the copies it saves.
    chunks = [Chunk.from_columns(k, [np.full((1, 4), k, np.float32), np.array([k])]) for k in range(7, 9)]
    column_data = []
    head = _sample_response(chunks, column_data)
    received = framing.parse_sample_response(
        framing.serialize_sample_response(framing.PackedSampleResponse(head, column_data)))
    assert received.response == head
    assert all(isinstance(c, bytes) for c in received.column_data)
    assert list(received.column_data) == column_data


def test_truncated_sample_responses_raise_decode_errors():
    column_data = []
    head = _sample_response(_chunks(), column_data)
    sent = framing.serialize_sample_response(framing.PackedSampleResponse(head, column_data))
    with pytest.raises(DecodeError):
        framing.parse_sample_response(sent[:-100])


def test_item_rows_encode_like_items():
    rows = [("a", 11, 1.5, [(True, ((7, 0, 1, 0),)), (False, ((7, 0, 1, 1), (8, 0, 2, 1)))]),
            ("b", 12, 0.0, [(False, ((9, 3, 4, 0),))])]
    items = [(table, Item(key, priority, columns, {})) for table, key, priority, columns in rows]
    from_rows, from_items = replay_pb2.ItemBatch(), replay_pb2.ItemBatch()
    codec.encode_item_rows(rows, from_rows)
    codec.encode_items(items, from_items)
    assert from_rows == from_items and list(from_rows.keys) == [11, 12]


def test_flat_dict_steps_refs_follow_the_first_steps_key_order(client):
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
        first = {"b": np.float32(1), "a": np.zeros(2, np.int64), "c": np.array([True])}
        refs = writer.append(first)
        assert list(refs) == ["b", "a", "c"]
        assert [r.leaf for r in refs.values()] == [1, 0, 2]  # leaves in sorted-key order
        second = writer.append({"a": np.ones(2, np.int64), "c": np.array([False]),
                                "b": np.float32(2)})
        assert list(second) == ["b", "a", "c"]  # as dm-tree's unflatten_as of the first step
        expected = tree.unflatten_as(first, [second[k] for k in sorted(second)])
        assert list(expected) == list(second) and all(expected[k] is second[k] for k in second)
        assert all(isinstance(r, CellRef) and r.step == 1 for r in second.values())
        writer.create_item("uniform", 1.0, second)
        writer.create_item("uniform", 1.0, {k: writer.history[k][-2:] for k in first})
        writer.flush()
    # column 1 is "b" (columns in sorted-key order): () when squeezed, (2,) over two steps
    sampled = client.sample("uniform", 40, emit_timesteps=False, unpack_as_table_signature=True)
    samples = {tuple(np.shape(s.data[1])): s.data for s in sampled}
    step = samples[()]
    np.testing.assert_array_equal(step[0], [1, 1])
    assert step[1] == np.float32(2) and step[2].tolist() == [False]
    both = samples[(2,)]
    np.testing.assert_array_equal(both[0], [[0, 0], [1, 1]])
    np.testing.assert_array_equal(both[1], [1.0, 2.0])


@pytest.mark.parametrize("other_step, columns", [
    ({"a": np.zeros(2, np.int64), "b": np.float32(1)}, ["a", "b", "c"]),  # a key missing
    ({"a": np.zeros(2, np.int64), "b": np.float32(1), "c": np.array([True]), "d": 1.0},
     ["a", "b", "c", "d"]),  # extra
    ({"a": np.zeros(2, np.int64), "b": np.float32(1), "x": np.array([True])},
     ["a", "b", "c", "x"]),  # other key
])
def test_flat_dict_steps_may_lack_or_add_keys_off_the_fast_path(client, other_step, columns):
    """As in Reverb: a missing key is a missing value, a new key a new column."""
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
        writer.append({"a": np.zeros(2, np.int64), "b": np.float32(1), "c": np.array([True])})
        refs = writer.append(other_step)
        assert sorted(refs) == sorted(other_step) and writer.episode_steps == 2
        assert sorted(writer.history) == columns
        missing = [k for k in columns if k not in other_step]
        for key in missing:
            with pytest.raises(ValueError, match="None data references"):
                writer.history[key][-1]
        writer.append({"a": np.zeros(2, np.int64), "b": np.float32(1), "c": np.array([True])})
        writer.create_item("uniform", 1.0, {k: writer.history[k][-1] for k in "abc"})


@pytest.mark.parametrize("bad_step", [
    {"a": [np.int64(0), np.int64(0)], "b": np.float32(1), "c": np.array([True])},  # a nest
    [np.zeros(2, np.int64), np.float32(1), np.array([True])],  # not a dict
])
def test_flat_dict_steps_with_another_structure_are_refused(client, bad_step):
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
        writer.append({"a": np.zeros(2, np.int64), "b": np.float32(1), "c": np.array([True])})
        with pytest.raises(errors.InvalidArgumentError, match="structure"):
            writer.append(bad_step)
        assert writer.episode_steps == 1
        with pytest.raises(errors.InvalidArgumentError, match=r"column \('a',\)"):
            writer.append({"a": np.zeros(3, np.int64), "b": np.float32(1), "c": np.array([True])})
        with pytest.raises(errors.InvalidArgumentError, match=r"column \('b',\). Got double"):
            writer.append({"a": np.zeros(2, np.int64), "b": 1.0, "c": np.array([True])})  # f64
        assert writer.episode_steps == 1


def test_single_array_steps_and_nested_steps_keep_working(client):
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        ref = writer.append(np.arange(3, dtype=np.float32))
        assert isinstance(ref, CellRef)
        writer.create_item("uniform", 1.0, writer.append(np.ones(3, np.float32)))
        with pytest.raises(errors.InvalidArgumentError, match="incompatible shape provided for column ()"):
            writer.append(np.ones(4, np.float32))
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        nested = writer.append({"obs": {"x": np.zeros(2), "y": np.int64(1)}, "r": np.float32(0)})
        assert isinstance(nested["obs"]["y"], CellRef) and nested["obs"]["y"].leaf == 1
        again = writer.append({"obs": {"x": np.ones(2), "y": np.int64(2)}, "r": np.float32(1)})
        writer.create_item("uniform", 1.0, again)
        with pytest.raises(errors.InvalidArgumentError, match="structure"):
            writer.append({"obs": 1.0, "r": np.float32(1)})


def _step_chunks(unused_column=False):
    """Two 16-step chunks of three columns; the constant one (>= 256 bytes) is lz4-compressed.
    With `unused_column` the chunks have a fourth column that `_step_item`s do not reference."""
    chunks = []
    for key in (1, 2):
        steps = np.arange(16) + 100 * key
        chunks.append(Chunk.from_columns(key, [
            np.stack([steps, -steps]).T.astype(np.float32),  # [16, 2]
            steps.astype(np.int64),
            np.full((16, 8), key, np.float32)] + [np.zeros(16, np.int8)] * unused_column))
    assert chunks[0].columns[2].compressed and not chunks[0].columns[1].compressed
    return {c.key: c for c in chunks}


def _step_item(key, chunk, offset, length=1):
    squeeze = length == 1
    return Item(key, 1.0, [(squeeze, ((chunk.key, offset, length, c),)) for c in range(3)], {chunk.key: chunk})


@pytest.mark.parametrize("whole_chunk_items", [True, False])
def test_columnar_sample_responses_carry_only_the_referenced_steps(whole_chunk_items):
    # Items covering every column of their chunk take the decoded-records path, the others the
    # per-column one; both must give the same batch.
    chunks = _step_chunks(unused_column=not whole_chunk_items)
    items = [_step_item(10, chunks[2], 5), _step_item(11, chunks[1], 0), _step_item(12, chunks[2], 15)]
    assert items[0].span == ((2, 5, 1, 0b111) if whole_chunk_items else None)
    batch = replay_pb2.ColumnBatch()
    nbytes = column_batch.encode_columns(items, batch)
    assert nbytes == 3 * (2 * 4 + 8 + 8 * 4)  # three steps, not two chunks of 16
    keys = [205, 100, 215]
    obs, step, const = column_batch.decode_columns(batch, 3)
    np.testing.assert_array_equal(step, keys)
    np.testing.assert_array_equal(obs, np.array([[k, -k] for k in keys], np.float32))
    np.testing.assert_array_equal(const, np.array([[2] * 8, [1] * 8, [2] * 8], np.float32))
    # Unsqueezed multi-step items keep their time dimension.
    batch = replay_pb2.ColumnBatch()
    column_batch.encode_columns([_step_item(20, chunks[1], 2, 3), _step_item(21, chunks[2], 13, 3)], batch)
    obs, step, const = column_batch.decode_columns(batch, 2)
    assert obs.shape == (2, 3, 2) and const.shape == (2, 3, 8)
    np.testing.assert_array_equal(step, [[102, 103, 104], [213, 214, 215]])


def test_columnar_encoding_declines_items_it_cannot_lay_out():
    chunks = _step_chunks()
    one = _step_item(1, chunks[1], 0)
    spanning = Item(2, 1.0, [(False, ((1, 15, 1, c), (2, 0, 1, c))) for c in range(3)], chunks)
    longer = _step_item(3, chunks[2], 0, 2)
    other_shape = Item(4, 1.0, [(True, ((5, 0, 1, 0),))],
                       {5: Chunk.from_columns(5, [np.zeros((1, 3), np.float32)])})
    first_shape = Item(6, 1.0, [(True, ((1, 0, 1, 0),))], chunks)
    delta = Chunk.from_columns(6, [np.zeros((2, 2), np.int32)] * 2, delta_encode=True)
    delta_item = Item(7, 1.0, [(True, ((6, 0, 1, 0),))], {6: delta})  # one of two columns: no span
    for items in ([one, spanning], [spanning], [one, longer], [first_shape, other_shape], [delta_item], []):
        batch = replay_pb2.ColumnBatch()
        assert column_batch.encode_columns(items, batch) is None
        assert batch == replay_pb2.ColumnBatch()


def test_whole_chunk_items_are_decoded_once_per_chunk_including_delta_columns():
    steps = np.arange(8 * 3, dtype=np.int32).reshape(8, 3) * 7
    chunk = Chunk.from_columns(6, [steps, steps.astype(np.float64)], delta_encode=True)
    assert chunk.columns[0].delta_encoded
    items = [Item(k, 1.0, [(False, ((6, k, 2, c),)) for c in range(2)], {6: chunk}) for k in (0, 5, 3)]
    batch = replay_pb2.ColumnBatch()
    assert column_batch.encode_columns(items, batch) == 3 * 2 * 3 * (4 + 8)
    ints, floats = column_batch.decode_columns(batch, 3)
    expected = np.stack([steps[k:k + 2] for k in (0, 5, 3)])
    np.testing.assert_array_equal(ints, expected)
    np.testing.assert_array_equal(floats, expected.astype(np.float64))
    assert chunk.step_records() is chunk.step_records()  # decoded once, kept with the chunk
    big = Chunk.from_columns(8, [np.zeros((64, 128), np.float32)])  # 32 kB: not kept decoded
    assert big.step_records() is None
    big_items = [Item(k, 1.0, [(True, ((8, k, 1, 0),))], {8: big}) for k in (1, 2)]
    batch = replay_pb2.ColumnBatch()
    assert column_batch.encode_columns(big_items, batch) == 2 * 128 * 4  # through the per-column path


def test_malformed_column_batches_raise_named_errors():
    chunks = _step_chunks()
    batch = replay_pb2.ColumnBatch()
    column_batch.encode_columns([_step_item(1, chunks[1], 0), _step_item(2, chunks[1], 1)], batch)
    with pytest.raises(errors.DataLossError, match="do not fit 3 values"):
        column_batch.decode_columns(batch, 3)
    truncated = replay_pb2.ColumnBatch()
    truncated.CopyFrom(batch)
    truncated.data[0] = truncated.data[0][:-1]
    with pytest.raises(errors.DataLossError, match="column 0 holds 15 bytes"):
        column_batch.decode_columns(truncated, 2)
    objects = replay_pb2.ColumnBatch()
    objects.CopyFrom(batch)
    objects.dtypes[1] = "O"
    with pytest.raises(errors.InvalidArgumentError, match="unusable dtype"):
        column_batch.decode_columns(objects, 2)
    ranks = replay_pb2.ColumnBatch()
    ranks.CopyFrom(batch)
    ranks.ranks[0] = 3
    with pytest.raises(errors.InvalidArgumentError, match="ranks"):
        column_batch.decode_columns(ranks, 2)
    short = replay_pb2.ColumnBatch()
    short.CopyFrom(batch)
    del short.data[2]
    with pytest.raises(errors.InvalidArgumentError, match="malformed ColumnBatch"):
        column_batch.decode_columns(short, 2)


def test_steps_stored_raw_encode_as_encode_column_does(client):
    # Incompressible steps are stored raw after a few tries; each one-step chunk then skips
    # encode_column. Its columns must be those encode_column gives, for every kind of leaf.
    rng = np.random.default_rng(1)
    steps = [{"x": rng.random(100, dtype=np.float32), "n": rng.integers(0, 1 << 60, (3, 4)),
              "s": np.array(b"ab" * (1 + i % 3))} for i in range(40)]
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        sent = []
        send = writer._stream.send  # noqa: SLF001 - capturing what the writer sends

        def capture(chunks, items, release_keys=()):
            sent.extend(chunks)
            return send(chunks, items, release_keys)

        writer._stream.send = capture  # noqa: SLF001
        for step in steps:
            writer.append(step)
            writer.create_item("uniform", 1.0, writer.history["x"][-1])
    assert len(sent) == len(steps)
    raw = 0
    for chunk, step in zip(sent, steps):
        leaves = [step["n"], step["s"], step["x"]]  # sorted-key order
        for column, leaf in zip(chunk.columns, leaves):
            if not column.compressed:
                raw += 1
                assert column == encode_column(leaf[np.newaxis], compress=False)
    assert raw > len(steps)  # the raw path ran for most steps of the random leaves
    written = {step["x"].tobytes() for step in steps}
    sampled = [np.asarray(s.data[0]) for s in client.sample("uniform", 100,
                                                            emit_timesteps=False, unpack_as_table_signature=True)]
    assert all(x.shape == (100,) and x.tobytes() in written for x in sampled)


def _span_items_of(chunks, spans):
    from replay.items import span_items

    return span_items([k for k, *_ in spans], [float(k) / 2 for k, *_ in spans],
                      [chunks[c] for _, c, *_ in spans], [o for *_, o, _, _ in spans],
                      [n for *_, n, _ in spans], [m for *_, m in spans], inserted_at=1.0)


def test_span_sample_encoding_writes_what_the_general_encoders_write():
    from replay import codec
    from replay.chunks import one_column_chunks

    rng = np.random.default_rng(0)
    steps = rng.random((4, 3, 5), dtype=np.float32)
    chunks = one_column_chunks([10, 11, 12, 13], "<f4", (5,), [s.tobytes() for s in steps],
                               [zlib.crc32(s.tobytes()) for s in steps], [3] * 4, [1, 1, 2, 2], [0, 3, 0, 3])
    chunks[2].columns  # noqa: B018 - a chunk whose columns were built reads the same
    # (key, chunk, offset, length, squeeze mask); chunk 11 is shared and an item is sampled twice
    spans = [(1, 1, 0, 3, 0), (2, 1, 2, 1, 1), (3, 2, 1, 2, 0), (2, 1, 2, 1, 1), (4, 0, 0, 1, 1)]
    items = _span_items_of(chunks, spans)
    fast_items, fast_chunks, fast_data = replay_pb2.ItemBatch(), replay_pb2.ChunkBatch(), []
    nbytes = codec.encode_span_sample("t", items, fast_items, fast_chunks, fast_data)
    general = _span_items_of(chunks, spans)  # fresh: reading trajectories builds them
    plain_items, plain_chunks, plain_data = replay_pb2.ItemBatch(), replay_pb2.ChunkBatch(), []
    codec.encode_items([("t", item) for item in general], plain_items)
    shared = {}
    for item in general:
        shared.update(item.chunks)
    codec.encode_chunks(shared.values(), plain_chunks, plain_data)
    assert fast_items == plain_items
    assert fast_chunks == plain_chunks
    assert fast_data == plain_data
    assert nbytes == sum(len(b) for b in plain_data) == 3 * steps[0].nbytes


def test_span_sample_encoding_declines_other_items_and_writes_nothing():
    from replay import codec
    from replay.chunks import one_column_chunks

    blob = np.zeros((1, 4), np.float32).tobytes()
    floats = one_column_chunks([1], "<f4", (4,), [blob], [zlib.crc32(blob)], [1], [0], [0])
    ints = one_column_chunks([2], "<i4", (4,), [blob], [zlib.crc32(blob)], [1], [0], [0])
    two_columns = Chunk.from_columns(3, [np.zeros((1, 4), np.float32), np.zeros((1, 2), np.int64)])
    compressed = Chunk.from_columns(4, [np.zeros((1, 4000), np.float32)])
    assert compressed.columns[0].compressed
    general = Item(9, 1.0, [(False, ((1, 0, 1, 0),))], {1: floats[0]})
    cases = [
        [general],
        _span_items_of({0: floats[0], 1: ints[0]}, [(1, 0, 0, 1, 0), (2, 1, 0, 1, 0)]),  # dtypes differ
        _span_items_of({0: two_columns}, [(1, 0, 0, 1, 0)]),
        _span_items_of({0: compressed}, [(1, 0, 0, 1, 0)]),
        [],
    ]
    for items in cases:
        item_batch, chunk_batch, data = replay_pb2.ItemBatch(), replay_pb2.ChunkBatch(), []
        assert codec.encode_span_sample("t", items, item_batch, chunk_batch, data) is None
        assert item_batch == replay_pb2.ItemBatch() and chunk_batch == replay_pb2.ChunkBatch() and not data
