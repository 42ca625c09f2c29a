"""Backpressure: writers held back by a SampleToInsertRatio rate limiter stay a few items ahead
of it, so their final flush succeeds shortly after the samplers stop; every acknowledged item
is accounted for exactly once, in the table, in a checkpoint or among the removed."""
import collections
import random
import threading
import time

import numpy as np
import pytest

from replay import errors, insert_stream
from replay.checkpoint import Checkpointer
from replay.rate_limiters import SampleToInsertRatio
from replay.selectors import Fifo, Uniform
from replay.server import Server
from replay.table import Table

pytestmark = pytest.mark.timeout(120)

NUM_WRITERS, NUM_SAMPLERS, NUM_MUTATORS = 32, 24, 8
ITEMS_PER_WRITER = 600
STEP_INTS = 50  # 400-byte steps, the size whose writers keep the most items in flight
SAMPLERS_OUTLAST_WRITERS_SECONDS = 3.0
FLUSH_TIMEOUT_SECONDS = 30.0


def _writer_budget_items():
    """The in-flight budget writers of STEP_INTS int64 steps get by default."""
    from replay import trajectory_writer

    return min(trajectory_writer._MAX_AUTO_IN_FLIGHT_ITEMS,  # noqa: SLF001
               trajectory_writer._AUTO_IN_FLIGHT_BYTES // (STEP_INTS * 8))  # noqa: SLF001


def test_writers_held_back_by_a_rate_limiter_flush_in_time_and_lose_nothing(tmp_path):
    # The writers' budget is far beyond what the limiter admits in SAMPLERS_OUTLAST_WRITERS_SECONDS:
    # only the window's fall under rate limiting lets their flushes succeed.
    assert _writer_budget_items() >= ITEMS_PER_WRITER
    table = Table("limited", Uniform(seed=1), Fifo(), 1_000_000,
                  SampleToInsertRatio(samples_per_insert=2.0, min_size_to_sample=10, error_buffer=40))
    server = Server([table], checkpointer=Checkpointer(str(tmp_path / "ckpt")))
    failures = []
    appended_all = [threading.Event() for _ in range(NUM_WRITERS)]
    samplers_stop = threading.Event()
    acked = collections.Counter()  # (writer, step) of every item whose flush succeeded
    unacked_after_appends = {}
    sampled_keys = collections.deque(maxlen=2000)
    lock = threading.Lock()
    probe_latencies = []

    def write(writer_id):
        try:
            client = server.localhost_client()
            with client.trajectory_writer(num_keep_alive_refs=1) as writer:
                for i in range(ITEMS_PER_WRITER):
                    step = np.zeros(STEP_INTS, np.int64)
                    step[0], step[1] = writer_id, i
                    writer.create_item("limited", 1.0, writer.append(step))
                unacked_after_appends[writer_id] = writer.num_unacked_items
                appended_all[writer_id].set()
                writer.flush(timeout_ms=int(FLUSH_TIMEOUT_SECONDS * 1000))
                with lock:
                    acked.update((writer_id, i) for i in range(ITEMS_PER_WRITER))
        except Exception as e:  # reported below; a thread cannot fail the test directly
            appended_all[writer_id].set()
            failures.append(f"writer {writer_id}: {e!r}")

    def sample():
        try:
            client = server.localhost_client()
            while not samplers_stop.is_set():
                try:
                    keys = [s.info.key for s in client.sample("limited", num_samples=32, timeout=0.2,
                                                              emit_timesteps=False, unpack_as_table_signature=True)]
                except errors.DeadlineExceededError:
                    continue
                with lock:
                    sampled_keys.extend(keys)
        except Exception as e:
            failures.append(f"sampler: {e!r}")

    def mutate(mutator_id):
        rng = random.Random(mutator_id)
        try:
            client = server.localhost_client()
            while not samplers_stop.is_set():
                with lock:
                    keys = rng.sample(list(sampled_keys), min(4, len(sampled_keys)))
                if keys:
                    client.mutate_priorities("limited", updates={k: rng.uniform(0.1, 3.0) for k in keys[1:]},
                                             deletes=keys[:1])
                time.sleep(0.02)
        except Exception as e:
            failures.append(f"mutator {mutator_id}: {e!r}")

    def probe():
        client = server.localhost_client()
        while not samplers_stop.is_set():
            started = time.monotonic()
            try:
                client.server_info(timeout=5.0)
            except errors.ReplayError as e:
                failures.append(f"server_info: {e!r}")
            probe_latencies.append(time.monotonic() - started)
            time.sleep(0.1)

    writers = [threading.Thread(target=write, args=(w,)) for w in range(NUM_WRITERS)]
    others = ([threading.Thread(target=sample) for _ in range(NUM_SAMPLERS)]
              + [threading.Thread(target=mutate, args=(m,)) for m in range(NUM_MUTATORS)]
              + [threading.Thread(target=probe)])
    try:
        started = time.monotonic()
        for t in writers + others:
            t.start()
        for event in appended_all:
            event.wait(timeout=90)
        time.sleep(SAMPLERS_OUTLAST_WRITERS_SECONDS)
        samplers_stop.set()
        for t in writers + others:
            t.join(timeout=FLUSH_TIMEOUT_SECONDS + 30)
        elapsed = time.monotonic() - started
        assert not any(t.is_alive() for t in writers + others), "deadlock: threads still running"
        assert failures == []
        # Held back by the limiter, each writer had only its rate-limited window in flight (and
        # what it sent before the server's report reached it), not its budget.
        assert sum(unacked_after_appends.values()) <= NUM_WRITERS * insert_stream._START_WINDOW_ITEMS  # noqa: SLF001
        info = server.localhost_client().server_info()["limited"]
        total = NUM_WRITERS * ITEMS_PER_WRITER
        assert sum(acked.values()) == len(acked) == total
        assert info.num_inserts == total  # every acknowledged item went in, none twice
        assert info.current_size + info.num_evictions + info.num_deletes == info.num_inserts
        assert info.num_deletes > 0 and info.num_samples >= 2 * total - 60
        path = server.localhost_client().checkpoint(timeout=60)
        (restored,) = Checkpointer.load(path)
        stored = [tuple(int(x) for x in restored.get(key).decode()[0][:2]) for key in restored.keys()]
        assert len(stored) == len(set(stored)) == restored.size == info.current_size  # no duplicates
        assert set(stored) <= set(acked)  # only acknowledged items
        assert sorted(table.keys()) == sorted(restored.keys())
        print(f"backpressure: {total} items in {elapsed:.1f} s, unacked after the last append "
              f"max {max(unacked_after_appends.values())}, server_info max "
              f"{max(probe_latencies) * 1000:.0f} ms")
    finally:
        samplers_stop.set()
        server.stop(grace=None)


def test_the_window_falls_when_the_server_reports_waiting_and_grows_back():
    # A queue of 4 blocks the fifth insert; sampling the queue empty lets the rest in.
    server = Server([Table.queue("q", 4)])
    try:
        client = server.localhost_client()
        with client.trajectory_writer(num_keep_alive_refs=1, max_in_flight_items=1000) as writer:
            stream = writer._stream  # noqa: SLF001 - the window is the stream's
            assert stream.window == insert_stream._START_WINDOW_ITEMS  # noqa: SLF001
            for i in range(8):
                writer.create_item("q", 1.0, writer.append(np.int64(i)))
            # the message says what went out and came back, so a stalled stream can be told
            # from one that a rate limiter holds back
            with pytest.raises(errors.DeadlineExceededError,
                               match=r"[1-9]\d* reports of waiting for a rate limiter"):
                writer.flush(timeout_ms=500)
            assert stream.window == insert_stream._RATE_LIMITED_WINDOW_ITEMS  # noqa: SLF001
            assert server.tables["q"].size == 4  # the rest of their message waits, unacked
            assert writer.num_unacked_items > 0
            got = [int(s.data[0]) for s in client.sample("q", 4, timeout=5,
                                                         emit_timesteps=False, unpack_as_table_signature=True)]
            started = time.monotonic()
            writer.flush(timeout_ms=5_000)  # the limiter reopened: promptly
            assert time.monotonic() - started < 2.0
            got += [int(s.data[0]) for s in client.sample("q", 4, timeout=5,
                                                          emit_timesteps=False, unpack_as_table_signature=True)]
            assert got == list(range(8))
            for i in range(40):  # messages that go in without waiting widen the window again
                writer.create_item("q", 1.0, writer.append(np.int64(i)))
                writer.flush(timeout_ms=5_000)
                list(client.sample("q", 1, timeout=5, emit_timesteps=False, unpack_as_table_signature=True))
            assert stream.window > insert_stream._RATE_LIMITED_WINDOW_ITEMS  # noqa: SLF001
            assert stream.num_unacked == stream.num_unacked_bytes == 0  # every ack counted its bytes off
    finally:
        server.stop(grace=None)


def test_a_writer_never_holds_more_than_the_byte_bound(monkeypatch):
    monkeypatch.setattr(insert_stream, "_MAX_IN_FLIGHT_BYTES", 64 * 1024)
    server = Server([Table.queue("q", 2)])
    try:
        client = server.localhost_client()
        writer = client.trajectory_writer(num_keep_alive_refs=1, max_in_flight_items=10_000)
        step = np.random.default_rng(0).random(4096)  # 32 kB, incompressible
        blocked = threading.Event()

        def write():
            for _ in range(6):
                writer.create_item("q", 1.0, writer.append(step))
            blocked.set()

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        assert not blocked.wait(1.0)  # two in the queue, then at most 64 kB in flight: blocked
        assert writer._stream.num_unacked_bytes <= 64 * 1024 + step.nbytes + 1024  # noqa: SLF001
        for _ in range(4):
            list(client.sample("q", 1, timeout=5, emit_timesteps=False, unpack_as_table_signature=True))
        assert blocked.wait(10)
        writer.close(flush=False, cancel=True)
    finally:
        server.stop(grace=None)


def test_a_stream_waiting_for_a_rate_limiter_is_not_read_ahead():
    """While a message waits for the limiter the server reads no further messages of that
    stream: what it holds for the stream is bounded by the transport's flow-control window,
    however much the writer has to send, and other calls are answered meanwhile."""
    import grpc

    from replay import codec
    from replay.chunks import Chunk
    from replay.items import Item, trajectory_from_chunks
    from replay.proto import replay_pb2, replay_pb2_grpc
    from tests.replay.server.conftest import GOOD_METADATA

    server = Server([Table.queue("q", 1)])
    payload = np.random.default_rng(0).random((1, 1 << 17))  # 1 MB, stored uncompressed
    pulled = []

    def requests():
        for key in range(1, 201):
            chunk = Chunk.from_columns(key, [payload], compress=False)
            request = replay_pb2.InsertRequest()
            codec.encode_chunks([chunk], request.chunks)
            codec.encode_items([("q", Item(key, 1.0, trajectory_from_chunks([chunk], 0, 1), {key: chunk}))],
                              request.items)
            if key > 1:
                request.release_chunk_keys.append(key - 1)
            pulled.append(key)
            yield request

    channel = grpc.insecure_channel(f"localhost:{server.port}")
    try:
        call = replay_pb2_grpc.ReplayServiceStub(channel).InsertStream(requests(), metadata=GOOD_METADATA)
        responses = iter(call)
        assert list(next(responses).item_keys) == [1]  # the queue had room for the first
        assert list(next(responses).item_keys) == []  # the second waits: reported
        time.sleep(2.0)
        started = time.monotonic()
        server.localhost_client().server_info(timeout=5)
        assert time.monotonic() - started < 1.0
        assert len(pulled) <= 40, f"the writer could hand over {len(pulled)} MB while its stream waited"
        assert server.tables["q"].size == 1
        print(f"pulled while waiting: {len(pulled)} messages of 1 MB")
        call.cancel()
    finally:
        channel.close()
        server.stop(grace=None)


def test_messages_waiting_for_a_rate_limiter_go_in_in_arrival_order_one_try_per_change():
    """Streams whose messages wait for one table form a line: a change (a sample) lets the head
    try, not every waiting stream, and they go in in the order they came."""
    table = Table.queue("q", 1)
    server = Server([table])
    tries = []
    try_insert_many = table.try_insert_many

    def counted(items):
        tries.append(len(items))
        return try_insert_many(items)

    table.try_insert_many = counted
    writers = []
    try:
        client = server.localhost_client()
        client.insert(np.int64(-1), {"q": 1.0})
        line = server._servicer._insert_lines[id(table)]  # noqa: SLF001 - the line under test
        for i in range(12):
            writer = server.localhost_client().trajectory_writer(num_keep_alive_refs=1)
            writer.create_item("q", 1.0, writer.append(np.int64(i)))
            writers.append(writer)
            deadline = time.monotonic() + 10
            while len(line.waiting) < i + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(line.waiting) == i + 1
        got = []
        for expected in range(-1, 12):
            before = len(tries)
            (sample,) = list(client.sample("q", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
            got.append(int(np.ravel(sample.data[0])[0]))  # [1] (insert's time dimension) or ()
            deadline = time.monotonic() + 10
            while len(line.waiting) > 11 - expected - 1 and expected < 11 and time.monotonic() < deadline:
                time.sleep(0.01)
            # the head went in and handed on; the next head tried once and waits (no herd of 12)
            assert len(tries) - before <= 3
        assert got == list(range(-1, 12))
        for writer in writers:
            writer.flush(timeout_ms=10_000)
    finally:
        for writer in writers:
            writer.close(flush=False, cancel=True)
        server.stop(grace=None)
