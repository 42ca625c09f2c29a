"""InsertStream's packed messages: what one `send` queues is split at the message limits with
every item in the same message as its chunks or a later one, and a writer's large send arrives
whole on a real server."""
import numpy as np

from replay import Fifo, MinSize, Server, Table, Uniform
from replay import insert_stream
from replay.chunks import Chunk
from replay.insert_stream import InsertStream
from replay.proto import replay_pb2


class _UnstartedClient:
    max_message_bytes = 64 << 20  # what InsertStream reads before its first send


def _queued_messages(stream):
    return [message.request().request for message in list(stream._full) + [stream._filling]]  # noqa: SLF001


def test_one_send_is_split_at_the_limits_with_items_after_their_chunks():
    stream = InsertStream(_UnstartedClient(), max_in_flight_items=10**6)
    big = [Chunk.from_columns(key, [np.full((1, 1_500_000 // 4), key, np.float32)], compress=False)
           for key in range(1, 7)]  # 1.5 MB each: at most two fit a 4 MB message
    small = [Chunk.from_columns(key, [np.full((1, 4), key, np.float32)], compress=False)
             for key in range(100, 100 + 3000)]
    chunks = big + small
    rows = [("t", 10_000 + c.key, 1.0, [(True, ((c.key, 0, 1, 0),))]) for c in chunks]
    with stream._lock:  # noqa: SLF001 - what send does once the call is open
        stream._pack(chunks, rows, [7, 8])  # noqa: SLF001
    messages = _queued_messages(stream)
    # two big chunks per message, then the small ones; the items fill the third and a fourth
    assert [len(m.chunks.keys) for m in messages] == [2, 2, 3002, 0]
    assert [len(m.items.keys) for m in messages] == [0, 0, 2048, len(rows) - 2048]
    sent_chunk_in = {}
    for index, request in enumerate(messages):
        column_bytes = sum(c.nbytes for c in chunks if c.key in set(request.chunks.keys))
        assert column_bytes <= insert_stream._MAX_BATCH_BYTES  # noqa: SLF001
        assert len(request.items.keys) <= insert_stream._MAX_BATCH_ITEMS  # noqa: SLF001
        sent_chunk_in.update((key, index) for key in request.chunks.keys)
        for chunk_key in request.items.slice_chunk_keys:
            assert sent_chunk_in[chunk_key] <= index  # the chunk went before or with its item
    assert [k for m in messages for k in m.items.keys] == [row[1] for row in rows]  # in order
    assert sorted(sent_chunk_in) == sorted(c.key for c in chunks)
    assert list(messages[-1].release_chunk_keys) == [7, 8]  # after every item of the send
    assert all(isinstance(m, replay_pb2.InsertRequest) for m in messages)


def test_a_send_over_the_item_limit_arrives_whole():
    server = Server([Table("fifo", Uniform(seed=0), Fifo(), 10_000, MinSize(1))])
    try:
        client = server.localhost_client()
        n = 2 * insert_stream._MAX_BATCH_ITEMS + 100  # noqa: SLF001
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            writer.append_step_items("fifo", {"x": np.arange(n, dtype=np.int64)})
            writer.flush()
        assert server.tables["fifo"].size == n
        values = sorted(int(s.data[0]) for s in client.sample("fifo", 300,
                                                              emit_timesteps=False, unpack_as_table_signature=True))
        assert values[0] >= 0 and values[-1] < n
    finally:
        server.stop()


def test_chunk_bytes_split_over_messages_are_counted_off_with_their_items():
    # Messages of chunks alone (the big ones) hand their bytes on to the message with the items;
    # once everything is acked no byte is left counted.
    server = Server([Table("t", Uniform(seed=0), Fifo(), 10_000, MinSize(1))])
    try:
        stream = InsertStream(server.localhost_client(), max_in_flight_items=10**6)
        big = [Chunk.from_columns(key, [np.full((1, 1_500_000 // 4), key, np.float32)], compress=False)
               for key in range(1, 7)]
        small = [Chunk.from_columns(key, [np.full((1, 4), key, np.float32)], compress=False)
                 for key in range(100, 400)]
        chunks = big + small
        rows = [("t", 10_000 + c.key, 1.0, [(True, ((c.key, 0, 1, 0),))]) for c in chunks]
        stream.send(chunks, rows, [c.key for c in chunks])
        stream.wait(0, timeout=30)
        assert stream.num_unacked == stream.num_unacked_bytes == 0
        assert server.tables["t"].size == len(rows)
        stream.close()
    finally:
        server.stop()
