"""A signed table holds only items consistent with its signature, each column in one shape family.

A column fits its spec either as a whole (`history["a"][-1]` for a spec of shape []) or step by
step (Reverb's legacy `Writer` and `Client.insert`, whose items have a time dimension, with a
signature describing one step). Whichever way a table's present items hold a column, a new item
must hold it the same way: `history["a"][-1:]` (shape [1]) is refused beside `[-1]` items
(shape []), so one signed table never holds items of several shapes. Refusals are
INVALID_ARGUMENT over gRPC, nothing of the message is stored, and the server keeps serving.
"""
import grpc
import numpy as np
import pytest

import replay.reverb as reverb
from replay import codec, errors, rate_limiters, selectors
from replay.chunks import Chunk
from replay.items import Item
from replay.proto import replay_pb2, replay_pb2_grpc
from replay.server import Server
from replay.specs import TensorSpec
from replay.table import Table
from tests.replay.server.conftest import GOOD_METADATA

pytestmark = pytest.mark.timeout(120)


def _signed_table(name="signed", max_times_sampled=0):
    return Table(name, selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                 max_times_sampled=max_times_sampled,
                 signature={"a": TensorSpec((), np.int64), "b": TensorSpec((2,), np.float32)})


def _chunk(key, length=3):
    return Chunk.from_columns(key, [np.arange(length, dtype=np.int64),
                                    np.ones([length, 2], np.float32)])


def _item(key, chunk, squeeze_a, length_a=1, length_b=1):
    """An item of `chunk`'s last steps: column a squeezed (one step, shape []) or of `length_a`
    steps, column b of `length_b` steps (shape [length_b, 2])."""
    end = chunk.length
    a = (True, ((chunk.key, end - 1, 1, 0),)) if squeeze_a else (False, ((chunk.key, end - length_a, length_a, 0),))
    b = (False, ((chunk.key, end - length_b, length_b, 1),))
    return Item(key, 1.0, (a, b), {chunk.key: chunk})


def test_a_column_held_whole_refuses_a_step_sized_column_and_keeps_the_table_as_it_was():
    table = _signed_table()
    chunk = _chunk(1)
    table.insert_or_assign(_item(10, chunk, squeeze_a=True, length_b=2))  # a: [] fits as a whole
    with pytest.raises(errors.SignatureMismatchError, match=r"column \('a',\) has shape \(1,\)"):
        table.insert_or_assign(_item(11, chunk, squeeze_a=False, length_a=1))  # history["a"][-1:]
    with pytest.raises(errors.SignatureMismatchError, match="one shape family"):
        table.insert_many([_item(12, chunk, squeeze_a=True), _item(13, chunk, squeeze_a=False, length_a=2)])
    assert table.keys() == [10]  # nothing of the refused batch went in
    table.insert_or_assign(_item(14, chunk, squeeze_a=True, length_b=3))  # b [T, 2] fits either way
    assert table.keys() == [10, 14]


def test_a_column_held_step_by_step_refuses_a_whole_sized_column():
    table = _signed_table()
    chunk = _chunk(2)
    table.insert_or_assign(_item(20, chunk, squeeze_a=False, length_a=3, length_b=3))  # a [3]: per step
    table.insert_or_assign(_item(21, chunk, squeeze_a=False, length_a=1, length_b=1))
    with pytest.raises(errors.SignatureMismatchError, match="as the whole column"):
        table.insert_or_assign(_item(22, chunk, squeeze_a=True))
    assert table.keys() == [20, 21]


def test_the_shape_family_is_chosen_afresh_once_the_table_is_empty_or_reset():
    table = _signed_table(max_times_sampled=1)
    chunk = _chunk(3)
    table.insert_or_assign(_item(30, chunk, squeeze_a=False, length_a=1))
    table.sample(1)  # the only item goes (max_times_sampled=1): the table is empty
    table.insert_or_assign(_item(31, chunk, squeeze_a=True))
    with pytest.raises(errors.SignatureMismatchError):
        table.insert_or_assign(_item(32, chunk, squeeze_a=False, length_a=1))
    table.reset()
    table.insert_or_assign(_item(33, chunk, squeeze_a=False, length_a=1))
    assert table.keys() == [33]


def test_columns_that_fit_neither_way_are_refused_whatever_the_table_holds():
    table = _signed_table()
    wrong_dtype = Chunk.from_columns(4, [np.arange(3, dtype=np.int32), np.ones([3, 2], np.float32)])
    with pytest.raises(errors.SignatureMismatchError, match="int32"):
        table.insert_or_assign(_item(40, wrong_dtype, squeeze_a=True))
    wrong_shape = Chunk.from_columns(5, [np.arange(3, dtype=np.int64), np.ones([3, 3], np.float32)])
    with pytest.raises(errors.SignatureMismatchError, match=r"\('b',\)"):
        table.insert_or_assign(_item(41, wrong_shape, squeeze_a=True))
    assert table.size == 0


def _request(chunk, items):
    request = replay_pb2.InsertRequest()
    codec.encode_chunks([chunk], request.chunks)
    codec.encode_items([("signed", item) for item in items], request.items)
    return request


@pytest.fixture
def signed_server():
    server = Server([_signed_table()])
    yield server
    server.stop(grace=None)


@pytest.fixture
def signed_stub(signed_server):
    channel = grpc.insecure_channel(f"localhost:{signed_server.port}")
    yield replay_pb2_grpc.ReplayServiceStub(channel)
    channel.close()


def test_over_grpc_a_refused_item_is_invalid_argument_nothing_is_stored_and_the_server_serves_on(
        signed_server, signed_stub):
    chunk = _chunk(50)
    list(signed_stub.InsertStream(iter([_request(chunk, [_item(51, chunk, squeeze_a=True)])]), metadata=GOOD_METADATA))
    assert signed_server.tables["signed"].keys() == [51]
    slice_chunk = _chunk(52)
    with pytest.raises(grpc.RpcError) as caught:
        list(signed_stub.InsertStream(
            iter([_request(slice_chunk, [_item(53, slice_chunk, squeeze_a=True),
                                         _item(54, slice_chunk, squeeze_a=False, length_a=1)])]),
            metadata=GOOD_METADATA))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "one shape family" in caught.value.details()
    assert signed_server.tables["signed"].keys() == [51]
    more = _chunk(55)
    list(signed_stub.InsertStream(iter([_request(more, [_item(56, more, squeeze_a=True)])]), metadata=GOOD_METADATA))
    assert signed_server.tables["signed"].keys() == [51, 56]


def test_a_client_gets_the_named_error_when_the_server_refuses(signed_server):
    client = reverb.Client(f"localhost:{signed_server.port}")
    client.insert({"a": np.int64(1), "b": np.ones(2, np.float32)}, {"signed": 1.0})  # [1] and [1, 2]: steps
    writer = client.trajectory_writer(2)
    writer.append({"a": np.int64(2), "b": np.ones(2, np.float32)})
    with pytest.raises(errors.SignatureMismatchError):
        # a [] and b [2] fit the signature exactly (a writer's own check passes them), but the
        # stored item holds both columns step by step
        writer.create_item("signed", 1.0, {"a": writer.history["a"][-1], "b": writer.history["b"][-1]})
        writer.flush()
    assert signed_server.tables["signed"].size == 1
    assert client.server_info()["signed"].current_size == 1
