"""Writers on the server's host put their chunk bytes in a shared-memory ring (replay.shared_ring,
replay.insert_stream): items arrive intact through many turns of the ring, with a rate limiter
holding the writer back too; a server that cannot open the ring gets the bytes inline; no ring
file outlives its stream."""
import os
import threading

import numpy as np
import pytest

from replay import rate_limiters, selectors, shared_ring
from replay.server import Server
from replay.table import Table

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(not os.path.isdir(shared_ring.SHM_DIR), reason="no /dev/shm")]

STEP_FLOATS = 10_240  # 40 kB steps: a writer of them offers a ring


def _ring_files():
    return {name for name in os.listdir(shared_ring.SHM_DIR) if name.startswith("replay-ring-")}


def _step(i):
    """Step `i`: its index, then noise (which does not compress, so the chunk stays 40 kB)."""
    step = np.random.default_rng(i).random(STEP_FLOATS, dtype=np.float32)
    step[0] = i
    return step


def _write(client, count, table="t"):
    """Writes `count` one-step items whose values are their index; returns the writer's stream."""
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for i in range(count):
            writer.append(_step(i))
            writer.create_item(table, 1.0, writer.history[-1])
        writer.flush()
        return writer._stream  # noqa: SLF001 - which path the bytes took


def _stored_values(table):
    return [float(table.get(key).decode()[0][0]) for key in table.keys()]


@pytest.fixture
def server():
    s = Server([Table("t", selectors.Fifo(), selectors.Fifo(), 5_000, rate_limiters.MinSize(1))])
    yield s
    s.stop(grace=None)


def test_large_steps_go_through_the_ring_intact_over_many_turns(server):
    before = _ring_files()
    client = server.localhost_client()
    # 2,000 steps of 40 kB are 80 MB, several times the writer's ring (at most 32 MB)
    stream = _write(client, 2_000)
    assert stream.messages_in_ring > 10
    table = server.tables["t"]
    assert _stored_values(table) == [float(i) for i in range(2_000)]
    assert all(np.array_equal(table.get(key).decode()[0], _step(i)) for i, key in enumerate(table.keys()[:50]))
    assert _ring_files() == before
    client.close()


def test_a_server_that_cannot_open_the_ring_gets_the_bytes_inline(server, monkeypatch):
    # the fault of a server on another host (or another /dev/shm): the ring's name means nothing there
    monkeypatch.setattr(shared_ring.ServerRing, "open", classmethod(lambda cls, name, nonce: None))
    before = _ring_files()
    client = server.localhost_client()
    stream = _write(client, 300)
    assert stream.messages_in_ring == 0
    assert _stored_values(server.tables["t"]) == [float(i) for i in range(300)]
    assert _ring_files() == before
    client.close()


def test_a_client_without_shared_memory_sends_every_byte_inline_and_keeps_the_setting_when_pickled(server):
    import pickle

    before = _ring_files()
    client = pickle.loads(pickle.dumps(server.localhost_client(shared_memory=False)))
    assert client.shared_memory is False
    stream = _write(client, 300)
    assert stream.messages_in_ring == 0
    assert _stored_values(server.tables["t"]) == [float(i) for i in range(300)]
    assert _ring_files() == before
    client.close()


def test_small_steps_offer_no_ring(server):
    client = server.localhost_client()
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for i in range(500):
            writer.append(np.full(25, i, np.float32))  # 100 B steps
            writer.create_item("t", 1.0, writer.history[-1])
        writer.flush()
        assert writer._stream.messages_in_ring == 0  # noqa: SLF001
    assert server.tables["t"].size == 500
    client.close()


def test_a_writer_held_back_by_a_full_queue_keeps_every_item_in_order():
    server = Server([Table.queue("q", 40)])
    try:
        client = server.localhost_client()
        received = []
        reader_client = server.localhost_client()

        def drain():
            for sample in reader_client.sample("q", 400, emit_timesteps=False):
                received.append(float(sample.data[0][0]))

        reader = threading.Thread(target=drain)
        written = threading.Event()

        def write():
            _write(client, 400, table="q")
            written.set()

        writer = threading.Thread(target=write)
        writer.start()
        # the queue fills: the writer is held back with most of its items not yet inserted
        assert not written.wait(1.0)
        assert server.tables["q"].size == 40
        reader.start()
        writer.join(timeout=20)
        reader.join(timeout=20)
        assert received == [float(i) for i in range(len(received))]
        assert written.is_set(), (len(received), server.tables["q"].size)
        assert received == [float(i) for i in range(400)]
        client.close()
        reader_client.close()
    finally:
        server.stop(grace=None)
