"""Bad input at the raw gRPC level: each gets the fitting status, others keep being served."""

import grpc
import numpy as np
import pytest

from replay import codec, protocol
from replay.chunks import Chunk
from replay.items import Item, trajectory_from_chunks
from replay.proto import replay_pb2, replay_pb2_grpc
from replay.server import Server
from tests.replay.server.conftest import GOOD_METADATA, make_tables

pytestmark = pytest.mark.timeout(120)



def _request(table="uniform", priority=1.0, key=1, chunk_key=100, send_chunk=True, corrupt=None,
             value=None):
    chunk = Chunk.from_columns(chunk_key, [np.full((1, 3), key if value is None else value, np.float32)])
    if corrupt is not None:
        chunk = Chunk(chunk.key, [corrupt(chunk.columns[0])], chunk.length)
    request = replay_pb2.InsertRequest()
    if send_chunk:
        codec.encode_chunks([chunk], request.chunks)
    item = Item(key, 1.0, trajectory_from_chunks([chunk], 0, 1), {chunk.key: chunk})
    item.priority = priority
    codec.encode_items([(table, item)], request.items)
    return request


def _insert(stub, requests, metadata=GOOD_METADATA):
    return list(stub.InsertStream(iter(requests), metadata=metadata))


def _status(stub, requests, metadata=GOOD_METADATA):
    with pytest.raises(grpc.RpcError) as caught:
        _insert(stub, requests, metadata)
    return caught.value.code(), caught.value.details()


def _ring_placed(offset=64, ring=None):
    """A request whose chunk bytes are said to be in the writer's shared-memory ring (at
    `offset`), after a first message naming `ring` (None: no ring was ever named)."""
    request = _request()
    request.chunks.ClearField("column_data")
    request.ring.offsets.append(offset)
    request.ring.lengths.append(12)
    if ring is None:
        return [request]
    return [replay_pb2.InsertRequest(ring_name=ring.name, ring_nonce=ring.nonce), request]


def _flipped(column):
    return column._replace(data=bytes([column.data[0] ^ 1]) + column.data[1:])


def _truncated(column):
    return column._replace(data=column.data[:-4])


CASES = {
    "unknown table": (lambda: [_request(table="nope")], grpc.StatusCode.NOT_FOUND, "no table named 'nope'"),
    "signature mismatch": (lambda: [_request(table="typed")], grpc.StatusCode.INVALID_ARGUMENT, "typed"),
    "negative priority": (lambda: [_request(priority=-1.0)], grpc.StatusCode.INVALID_ARGUMENT, "priority"),
    "nan priority": (lambda: [_request(priority=float("nan"))], grpc.StatusCode.INVALID_ARGUMENT, "priority"),
    "chunk never sent": (lambda: [_request(send_chunk=False, chunk_key=777)], grpc.StatusCode.NOT_FOUND, "777"),
    "corrupt chunk": (lambda: [_request(corrupt=_flipped)], grpc.StatusCode.DATA_LOSS, "checksum"),
    "truncated chunk": (lambda: [_request(corrupt=_truncated)], grpc.StatusCode.DATA_LOSS, "chunk 100"),
    "ring data without a ring": (_ring_placed, grpc.StatusCode.INVALID_ARGUMENT, "shared-memory ring"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_insert_gets_its_status_and_nothing_stored_changes(server, stub, case):
    _insert(stub, [_request(key=1, chunk_key=1)])  # one good item stored before
    make_requests, code, message = CASES[case]
    got_code, details = _status(stub, make_requests())
    assert got_code == code
    assert message in details
    # Nothing stored changed, and the server still serves a good writer.
    assert server.tables["uniform"].keys() == [1]
    acks = _insert(stub, [_request(key=2, chunk_key=2, value=5.0)])
    assert [list(a.item_keys) for a in acks] == [[2]]
    assert np.all(server.tables["uniform"].get(2).decode()[0] == 5.0)


def test_insert_columns_outside_the_writers_ring_are_data_loss(server, stub):
    from replay import shared_ring

    ring = shared_ring.ClientRing.create(1 << 20)
    if ring is None:
        pytest.skip("no shared memory here")
    try:
        _insert(stub, [_request(key=1, chunk_key=1)])
        for offset in (8, 1 << 21):  # inside the ring's header; past its end
            code, details = _status(stub, _ring_placed(offset, ring))
            assert code == grpc.StatusCode.DATA_LOSS
            assert "outside" in details
        assert server.tables["uniform"].keys() == [1]
        assert [list(a.item_keys) for a in _insert(stub, [_request(key=2, chunk_key=2)])] == [[2]]
    finally:
        ring.close()


def test_malformed_batch_is_invalid_argument(stub):
    request = _request()
    request.chunks.num_columns.append(4)  # one more chunk declared than sent
    code, details = _status(stub, [request])
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "num_columns" in details


def test_wrong_or_missing_protocol_version_is_failed_precondition(stub):
    for metadata in ((("replay-protocol", "999"),), ()):
        code, details = _status(stub, [_request()], metadata)
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        assert "999" in details or "unknown" in details
        assert str(protocol.PROTOCOL_VERSION) in details
    with pytest.raises(grpc.RpcError) as caught:
        stub.ServerInfo(replay_pb2.ServerInfoRequest(), metadata=(("replay-protocol", "999"),))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_bad_unary_requests(server, stub):
    with pytest.raises(grpc.RpcError) as caught:
        stub.MutatePriorities(replay_pb2.MutatePrioritiesRequest(
            table="uniform", updates=replay_pb2.PriorityUpdates(keys=[1, 2], priorities=[1.0])),
            metadata=GOOD_METADATA)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as caught:
        stub.Checkpoint(replay_pb2.CheckpointRequest(), metadata=GOOD_METADATA)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "checkpointer" in caught.value.details()
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.SampleStream(iter([replay_pb2.SampleRequest(table="nope", num_samples=1)]),
                               metadata=GOOD_METADATA))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_oversize_message_is_resource_exhausted_and_server_keeps_serving():
    with Server(make_tables(), max_message_bytes=64 * 1024) as server:
        channel = grpc.insecure_channel(f"localhost:{server.port}")
        stub = replay_pb2_grpc.ReplayServiceStub(channel)
        chunk = Chunk.from_columns(5, [np.random.default_rng(0).random((1, 40_000)).astype(np.float32)],
                                   compress=False)
        request = replay_pb2.InsertRequest()
        codec.encode_chunks([chunk], request.chunks)
        code, _ = _status(stub, [request])
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        acks = _insert(stub, [_request(key=3, chunk_key=3)])
        assert [list(a.item_keys) for a in acks] == [[3]]
        # The client refuses a chunk over its own limit before sending, with the same error class.
        client = server.localhost_client(max_message_bytes=128 * 1024)
        writer = client.writer(1)
        writer.append(np.zeros(100_000, np.float32) + np.arange(100_000, dtype=np.float32))
        from replay import errors

        with pytest.raises(errors.ResourceExhaustedError, match="max_message_bytes"):
            writer.create_item("uniform", 1, 1.0)
        channel.close()


def test_a_failing_stream_does_not_disturb_a_concurrent_one(server, stub):
    client = server.localhost_client()
    writer = client.writer(1)
    for t in range(50):
        writer.append(np.full(3, t, np.float32))
        writer.create_item("uniform", 1, 1.0)
        if t == 25:
            code, _ = _status(stub, [_request(table="nope")])
            assert code == grpc.StatusCode.NOT_FOUND
    writer.close()
    assert server.tables["uniform"].size == 50
