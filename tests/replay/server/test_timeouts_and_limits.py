"""Calls that must not freeze or exhaust the server: huge sample batches, client timeouts on
sample and insert (cancelled on the server, no late insert), more streams than any thread pool,
and the user-set resource limits (the right status, the limit named, everyone else served)."""
import queue
import threading
import time

import grpc
import numpy as np
import pytest

from replay import errors, protocol, rate_limiters, selectors
from replay.proto import replay_pb2
from replay.server import Server
from replay.table import Table

pytestmark = pytest.mark.timeout(120)

METADATA = ((protocol.PROTOCOL_METADATA_KEY, str(protocol.PROTOCOL_VERSION)),)


def _uniform(name="uniform", max_size=1000):
    return Table(name, selectors.Uniform(seed=1), selectors.Fifo(), max_size, rate_limiters.MinSize(1))


def _fifo_once(name="fifo_once"):
    return Table(name, selectors.Fifo(), selectors.Fifo(), 100_000, rate_limiters.MinSize(1),
                 max_times_sampled=1)


@pytest.fixture
def make_server():
    started = []

    def make(tables, **kwargs):
        server = Server(tables, **kwargs)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop(grace=None)


def _raw_sample_stream(client, request: replay_pb2.SampleRequest, requests_queue=None):
    """A raw SampleStream call sending `request` (then whatever is put on `requests_queue`)."""
    client.stub  # noqa: B018 - opens the channel
    pending = requests_queue if requests_queue is not None else queue.SimpleQueue()
    pending.put(request)

    def requests():
        while True:
            item = pending.get()
            if item is None:
                return
            yield item

    call = client._channel.stream_stream(
        f"/{protocol.SERVICE_NAME}/SampleStream",
        request_serializer=replay_pb2.SampleRequest.SerializeToString,
        response_deserializer=replay_pb2.SampleResponse.FromString)(requests(), metadata=METADATA)
    return call, pending


# -- item 1: a huge batch request ----------------------------------------------------------------


def test_a_huge_sample_batch_is_refused_and_the_table_keeps_serving(make_server):
    server = make_server([_uniform()])
    client = server.localhost_client()
    for i in range(5):
        client.insert(np.float32(i), {"uniform": 1.0}, timeout=10)
    call, pending = _raw_sample_stream(client, replay_pb2.SampleRequest(
        table="uniform", num_samples=2**62, max_batch_size=2**31 - 1))
    with pytest.raises(grpc.RpcError) as caught:
        next(call)
    pending.put(None)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_sample_batch_size" in caught.value.details()
    # The table was never locked for it: everyone is served at once.
    assert client.server_info(timeout=5)["uniform"].num_samples == 0
    assert len(list(client.sample("uniform", 3, timeout=5, emit_timesteps=False, unpack_as_table_signature=True))) == 3


def test_unbounded_credit_is_served_in_bounded_pieces_and_stops_when_cancelled(make_server):
    server = make_server([_uniform()], max_sample_batch_size=64)
    client = server.localhost_client()
    for i in range(5):
        client.insert(np.float32(i), {"uniform": 1.0}, timeout=10)
    call, pending = _raw_sample_stream(client, replay_pb2.SampleRequest(
        table="uniform", num_samples=2**62, max_batch_size=64))
    sizes = [len(next(call).probabilities) for _ in range(20)]
    assert max(sizes) <= 64
    # While that stream has (practically) unlimited credit, others are served promptly.
    other = server.localhost_client()
    assert other.server_info(timeout=5)["uniform"].current_size == 5
    assert len(list(other.sample("uniform", 2, timeout=5))) == 2
    call.cancel()
    pending.put(None)
    # A cancelled stream stops: the sample counter settles.
    deadline = time.monotonic() + 10
    settled = None
    while time.monotonic() < deadline:
        before = other.server_info(timeout=5)["uniform"].num_samples
        time.sleep(0.3)
        if other.server_info(timeout=5)["uniform"].num_samples == before:
            settled = before
            break
    assert settled is not None, "the cancelled stream kept sampling"
    time.sleep(0.5)
    assert other.server_info(timeout=5)["uniform"].num_samples == settled


# -- client timeouts -----------------------------------------------------------------------------


def _fill_streams(server, table, count):
    """`count` sample streams waiting (without a timeout) on the empty `table`."""
    clients = [server.localhost_client() for _ in range(count)]
    streams = []
    for client in clients:
        call, pending = _raw_sample_stream(client, replay_pb2.SampleRequest(
            table=table, num_samples=1, rate_limiter_timeout_ms=-1))
        streams.append((call, pending))
    return clients, streams


def _close_streams(clients, streams):
    for call, pending in streams:
        call.cancel()
        pending.put(None)
    for client in clients:
        client.close()


def test_sample_timeout_bounds_the_call_even_with_many_open_streams(make_server):
    server = make_server([_uniform(), _uniform("empty")])
    clients, streams = _fill_streams(server, "empty", 80)  # more than any worker pool used to have
    try:
        client = server.localhost_client()
        assert client.server_info(timeout=5)["empty"].current_size == 0
        with pytest.raises(errors.DeadlineExceededError, match="min_size_to_sample"):
            next(client.sample("empty", 1, timeout=0.5, emit_timesteps=False, unpack_as_table_signature=True))
        client.insert(np.float32(7), {"uniform": 1.0}, timeout=5)
        assert next(client.sample("uniform", 1, timeout=5,
                                  emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 7
    finally:
        _close_streams(clients, streams)


def test_a_sample_stream_past_its_deadline_is_cancelled_and_leaves_no_trace(make_server):
    server = make_server([_fifo_once()])
    client = server.localhost_client()
    with pytest.raises(errors.DeadlineExceededError, match="deadline"):
        for _ in client.sample_stream("fifo_once", rate_limiter_timeout_ms=-1, timeout=0.5):
            pass
    # The server-side call ended too: an item inserted now is not consumed by it.
    client.insert(np.float32(1), {"fifo_once": 1.0}, timeout=5)
    time.sleep(0.5)
    info = client.server_info(timeout=5)["fifo_once"]
    assert (info.current_size, info.num_samples) == (1, 0)
    assert next(client.sample("fifo_once", 1, timeout=5,
                              emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 1


def test_an_insert_timeout_cancels_the_insert_on_the_server(make_server):
    server = make_server([Table.queue("queue", 1)])
    client = server.localhost_client()
    client.insert(np.float32(1), {"queue": 1.0}, timeout=5)  # the queue is now full
    with pytest.raises(errors.DeadlineExceededError, match="not acknowledged within 0.3 s"):
        client.insert(np.float32(2), {"queue": 1.0}, timeout=0.3)
    # Taking the first item makes room; the timed-out insert must not land in it, ever.
    assert next(client.sample("queue", 1, timeout=5, emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 1
    for _ in range(5):
        time.sleep(0.1)
        info = client.server_info(timeout=5)["queue"]
        assert (info.num_inserts, info.current_size) == (1, 0)
    # A retry inserts the item exactly once.
    client.insert(np.float32(2), {"queue": 1.0}, timeout=5)
    assert next(client.sample("queue", 1, timeout=5, emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 2
    assert client.server_info(timeout=5)["queue"].num_inserts == 2


def test_many_timed_out_inserts_do_not_exhaust_the_server(make_server):
    server = make_server([Table.queue("queue", 1)])
    client = server.localhost_client()
    client.insert(np.float32(0), {"queue": 1.0}, timeout=5)
    outcomes = queue.SimpleQueue()

    def insert(value):
        try:
            server.localhost_client().insert(np.float32(value), {"queue": 1.0}, timeout=0.3)
            outcomes.put("inserted")
        except errors.DeadlineExceededError:
            outcomes.put("timed out")
        except Exception as e:  # reported below
            outcomes.put(e)

    threads = [threading.Thread(target=insert, args=(v,)) for v in range(1, 81)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    results = [outcomes.get_nowait() for _ in threads]
    assert results == ["timed out"] * 80
    # The sample that unblocks inserts still runs, and none of the 80 lands afterwards.
    assert next(client.sample("queue", 1, timeout=5, emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 0
    time.sleep(0.5)
    info = client.server_info(timeout=5)["queue"]
    assert (info.num_inserts, info.current_size) == (1, 0)
    client.insert(np.float32(99), {"queue": 1.0}, timeout=5)
    assert next(client.sample("queue", 1, timeout=5,
                              emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 99


# -- limits --------------------------------------------------------------------------------------


def test_max_concurrent_streams_refuses_one_more_and_serves_the_rest(make_server):
    server = make_server([_uniform(), _uniform("empty")], max_concurrent_streams=3)
    clients, streams = _fill_streams(server, "empty", 3)
    try:
        client = server.localhost_client()
        assert client.server_info(timeout=5)["uniform"].current_size == 0  # unary calls are not streams
        with pytest.raises(errors.ResourceExhaustedError, match="max_concurrent_streams limit \\(3\\)"):
            client.insert(np.float32(1), {"uniform": 1.0}, timeout=5)
    finally:
        _close_streams(clients, streams)
    deadline = time.monotonic() + 10
    while True:  # the closed streams are given back as the server sees their cancellation
        try:
            client.insert(np.float32(1), {"uniform": 1.0}, timeout=5)
            break
        except errors.ResourceExhaustedError:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert next(client.sample("uniform", 1, timeout=5,
                              emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 1


def test_max_in_flight_bytes_per_stream_ends_only_the_stream_over_it(make_server):
    server = make_server([_uniform()], max_in_flight_bytes_per_stream=20_000)
    client = server.localhost_client()
    rng = np.random.default_rng(0)
    with pytest.raises(errors.ResourceExhaustedError, match="max_in_flight_bytes_per_stream limit \\(20000\\)"):
        with client.trajectory_writer(num_keep_alive_refs=50) as writer:
            for _ in range(50):  # incompressible 4 kB steps, all kept alive
                refs = writer.append(rng.random(1000, dtype=np.float32))
                writer.create_item("uniform", 1.0, refs)
            writer.flush(timeout_ms=10_000)
    # A writer that releases its steps goes on writing.
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for _ in range(50):
            writer.create_item("uniform", 1.0, writer.append(rng.random(1000, dtype=np.float32)))
    assert client.server_info(timeout=5)["uniform"].num_inserts >= 50


def test_max_message_bytes_is_named_when_a_message_is_too_large(make_server):
    server = make_server([_uniform()], max_message_bytes=64 * 1024)
    client = server.localhost_client()
    rng = np.random.default_rng(0)
    with pytest.raises(errors.ResourceExhaustedError, match="max_message_bytes"):
        client.insert(rng.random(100_000, dtype=np.float32), {"uniform": 1.0}, timeout=10)
    client.insert(np.float32(3), {"uniform": 1.0}, timeout=5)
    assert next(client.sample("uniform", 1, timeout=5,
                              emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 3


def test_sample_responses_stay_within_the_clients_max_message_bytes(make_server):
    server = make_server([_uniform()])
    rng = np.random.default_rng(0)
    with server.localhost_client().trajectory_writer(1) as writer:
        for _ in range(100):  # 4 MB of incompressible 40 kB items
            writer.create_item("uniform", 1.0, writer.append(rng.random(10_000, dtype=np.float32)))
    limit = 512 * 1024
    client = server.localhost_client(max_message_bytes=limit)
    responses = list(client.sample_responses("uniform", max_in_flight=100, max_samples=300, timeout=30))
    counts = [len(r.response.probabilities) for r in responses]
    assert sum(counts) == 300 and max(counts) > 1
    # The first response too holds several items: its first item's size bounds the rest.
    assert counts[0] > 1
    # The server aims at half the limit; its estimate of an item's bytes (from the last
    # response, where an item sampled twice counts once) may fall short, never by half.
    assert max(sum(len(c) for c in r.column_data) for r in responses) <= limit
    # A client with the default limit gets the server's larger responses.
    default = server.localhost_client()
    counts = [len(r.response.probabilities)
              for r in default.sample_responses("uniform", max_in_flight=100, max_samples=100, timeout=30)]
    assert max(counts) > limit // 40_000


def test_limits_must_be_positive_integers():
    for name in ("max_sample_batch_size", "max_concurrent_streams", "max_in_flight_bytes_per_stream",
                 "max_message_bytes"):
        with pytest.raises(errors.InvalidArgumentError, match=name):
            Server([_uniform()], **{name: 0})


def test_replay_server_flags_set_the_limits(tables_yaml, server_process_factory):
    from replay.client import Client

    process = server_process_factory(tables_yaml, "--max-sample-batch-size", 8, "--max-concurrent-streams", 1,
                                     "--max-in-flight-bytes-per-stream", 100_000, "--max-message-bytes", 1_000_000)
    client = Client(process.address)
    client.insert(np.float32(5), {"uniform": 1.0}, timeout=10)
    call, pending = _raw_sample_stream(client, replay_pb2.SampleRequest(
        table="uniform", num_samples=1, max_batch_size=9))
    with pytest.raises(grpc.RpcError) as caught:
        next(call)
    pending.put(None)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_sample_batch_size limit (8)" in caught.value.details()
    assert next(client.sample("uniform", 1, timeout=10,
                              emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 5
    process.terminate()
    returncode, _ = process.read_until_exit()
    assert returncode == 0
    assert any("max_sample_batch_size 8, max_concurrent_streams 1, max_in_flight_bytes_per_stream 100000"
               in line for line in process.lines)
