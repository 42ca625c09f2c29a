"""Validation on insert: everything the server acknowledges decodes to its declared dtype and
shape, so sampling never fails afterwards; malformed dtypes and shapes are INVALID_ARGUMENT."""
import logging
import zlib

import grpc
import lz4.block
import numpy as np
import pytest

from replay import codec, column_batch, protocol
from replay.chunks import Chunk, ColumnData
from replay.items import Item, trajectory_from_chunks
from replay.proto import replay_pb2
from tests.replay.server.conftest import GOOD_METADATA

pytestmark = pytest.mark.timeout(120)



def _column(dtype, shape, data, compressed=False, delta=False):
    """A column with a correct checksum over whatever bytes it is given."""
    return ColumnData(dtype, tuple(shape), data, compressed, delta, zlib.crc32(data))


def _request(key, columns, table="uniform", length=1):
    chunk = Chunk(key, columns, length)
    request = replay_pb2.InsertRequest()
    codec.encode_chunks([chunk], request.chunks)
    item = Item(key, 1.0, trajectory_from_chunks([chunk], 0, length), {key: chunk})
    codec.encode_items([(table, item)], request.items)
    return request


def _not_lz4(raw_size, garbage=b"\xff" * 40):
    """Bytes with a valid lz4 size prefix followed by something that is not an lz4 block."""
    return raw_size.to_bytes(4, "little") + garbage


def _store_good_items(client):
    with client.writer(1) as writer:
        for value in range(5):
            writer.append(np.full(3, value, np.float32))
            writer.create_item("uniform", 1, 1.0)
    client.insert({"obs": np.full(3, 7, np.float32), "action": np.int64(7)}, {"typed": 1.0})


def _assert_everything_sampleable(server, client):
    """Every stored item samples through the per-item and the columnar path."""
    assert server.tables["uniform"].size == 5 and server.tables["typed"].size == 1
    values = {float(s.data[0][0, 0]) for s in client.sample("uniform", 100, timeout=10,
                                                            emit_timesteps=False, unpack_as_table_signature=True)}
    assert values == {0.0, 1.0, 2.0, 3.0, 4.0}
    typed = next(client.sample("typed", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)).data
    assert typed["action"] == 7 and np.all(typed["obs"] == 7)
    responses = client.sample_responses("uniform", 16, timeout_ms=10_000, max_samples=16, columnar=True)
    seen = 0
    for packed in responses:
        n = len(packed.response.probabilities)
        (column,) = column_batch.decode_columns(packed.response.columns, n)
        assert set(column[:, 0, 0].tolist()) <= {0.0, 1.0, 2.0, 3.0, 4.0}
        seen += n
    assert seen == 16


UNDECODABLE_COLUMNS = {
    # (table, columns, item length, status, words of the message)
    "compressed but not lz4, no signature": (
        "uniform", [_column("<f4", (64,), _not_lz4(256), compressed=True)], 1,
        grpc.StatusCode.INVALID_ARGUMENT, "not a valid lz4 block"),
    "compressed but not lz4, with signature": (
        "typed", [_column("<f4", (3,), _not_lz4(3 * 4 * 30, b"\x00\x01" * 20), compressed=True),
                  _column("<i8", (), _not_lz4(8 * 30), compressed=True)], 30,
        grpc.StatusCode.INVALID_ARGUMENT, "lz4"),
    "valid lz4 block that decodes to fewer bytes than its size prefix": (
        "uniform", [_column("<f4", (64,), (256).to_bytes(4, "little")
                            + lz4.block.compress(bytes(200), store_size=False), compressed=True)], 1,
        grpc.StatusCode.INVALID_ARGUMENT, "not a valid lz4 block of 256 bytes"),
    "lz4 size prefix claiming far more than the bytes can hold": (
        "uniform", [_column("<f4", (2**28,), _not_lz4(2**30), compressed=True)], 1,
        grpc.StatusCode.INVALID_ARGUMENT, "cannot hold"),
    "zero-size dtype S0": (
        "uniform", [_column("|S0", (), b"")], 1, grpc.StatusCode.INVALID_ARGUMENT, "'|S0'"),
    "zero-size dtype U0": (
        "uniform", [_column("<U0", (3,), b"")], 1, grpc.StatusCode.INVALID_ARGUMENT, "zero-size"),
    "subarray dtype": (
        "uniform", [_column("(3,)f4", (), bytes(12))], 1, grpc.StatusCode.INVALID_ARGUMENT, "subarray"),
    "structured dtype": (
        "uniform", [_column("f4,i4", (), bytes(8))], 1, grpc.StatusCode.INVALID_ARGUMENT, "structured"),
    "object dtype": (
        "uniform", [_column("|O", (), bytes(8))], 1, grpc.StatusCode.INVALID_ARGUMENT, "object"),
    "delta-encoded bytes column": (
        "uniform", [_column("|S4", (2,), b"abcdefgh", delta=True)], 1,
        grpc.StatusCode.INVALID_ARGUMENT, "delta-encoded"),
    "delta-encoded float column": (
        "uniform", [_column("<f4", (2,), bytes(8), delta=True)], 1,
        grpc.StatusCode.INVALID_ARGUMENT, "delta-encoded"),
}


@pytest.mark.parametrize("case", sorted(UNDECODABLE_COLUMNS))
def test_undecodable_column_is_refused_at_insert_and_sampling_keeps_working(server, client, stub, case):
    _store_good_items(client)
    table, columns, length, code, words = UNDECODABLE_COLUMNS[case]
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.InsertStream(iter([_request(900, columns, table, length)]), metadata=GOOD_METADATA))
    assert caught.value.code() == code, caught.value.details()
    assert words in caught.value.details()
    assert "chunk 900 column 0" in caught.value.details()
    _assert_everything_sampleable(server, client)


MALFORMED_DTYPES = [",", "(2,", "(-1,)f4", "(100000000000000,)f8", "f4" * 100, "", "float33",
                    "[('a', 'f4')]", "(3,)(4,)f4", "M8[zz]"]


@pytest.mark.parametrize("dtype", MALFORMED_DTYPES, ids=lambda d: repr(d[:24]))
def test_malformed_dtype_string_is_invalid_argument_without_a_traceback(server, client, stub, dtype,
                                                                        caplog):
    _store_good_items(client)
    caplog.set_level(logging.WARNING, logger="replay.server")
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.InsertStream(iter([_request(901, [_column(dtype, (), bytes(4))])]),
                               metadata=GOOD_METADATA))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert "chunk 901 column 0: dtype" in caught.value.details()
    assert repr(dtype)[:30] in caught.value.details()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no "unexpected error"
    _assert_everything_sampleable(server, client)


@pytest.mark.parametrize("shape", [(-1,), (2**31,), (1,) * 40, (0, 2**31 - 1, 2**31 - 1)])
def test_undecodable_shape_is_invalid_argument(server, client, stub, shape):
    _store_good_items(client)
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.InsertStream(iter([_request(902, [_column("<f4", shape, b"")])]),
                               metadata=GOOD_METADATA))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert "chunk 902 column 0: shape" in caught.value.details()
    _assert_everything_sampleable(server, client)


def test_valid_columns_of_every_encoding_are_accepted_and_sample_back(server, client, stub):
    """The checks refuse nothing a writer produces: compressed, raw and delta-encoded columns."""
    steps = np.arange(40 * 8, dtype=np.int64).reshape(40, 8) * 3
    chunk = Chunk.from_columns(903, [steps, np.tile(np.arange(64, dtype=np.float32), (40, 1)),
                                     np.array([b"ab"] * 40)], delta_encode=True)
    assert chunk.columns[0].delta_encoded and chunk.columns[1].compressed
    request = replay_pb2.InsertRequest()
    codec.encode_chunks([chunk], request.chunks)
    item = Item(903, 1.0, trajectory_from_chunks([chunk], 0, 40), {903: chunk})
    codec.encode_items([("uniform", item)], request.items)
    acks = list(stub.InsertStream(iter([request]), metadata=GOOD_METADATA))
    assert [list(a.item_keys) for a in acks] == [[903]]
    data = next(client.sample("uniform", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)).data
    np.testing.assert_array_equal(data[0], steps)
    assert data[2].tolist() == [b"ab"] * 40


@pytest.mark.parametrize("method", ["InsertStream", "SampleStream", "ServerInfo", "Reset", "MutatePriorities",
                                    "Checkpoint"])
def test_bytes_that_are_not_a_message_are_invalid_argument(server, client, method):
    _store_good_items(client)
    channel = grpc.insecure_channel(f"localhost:{server.port}")
    garbage = b"\xff\xff\x01 not a protobuf message"
    with pytest.raises(grpc.RpcError) as caught:
        if method.endswith("Stream"):
            list(channel.stream_stream(f"/{protocol.SERVICE_NAME}/{method}")(
                iter([garbage]), metadata=GOOD_METADATA, timeout=30))
        else:
            channel.unary_unary(f"/{protocol.SERVICE_NAME}/{method}")(garbage, metadata=GOOD_METADATA, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    assert f"malformed {method} request" in caught.value.details()
    channel.close()
    _assert_everything_sampleable(server, client)
