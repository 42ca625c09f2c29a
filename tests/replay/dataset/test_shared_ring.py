"""The shared-memory ring of sample streams (replay.shared_ring): its allocation rules, and real
streams from a server on loopback whose responses' bytes come through it, fall back to gRPC
when it is full, and leave nothing behind in /dev/shm."""
import os
import time

import numpy as np
import pytest

from replay import shared_ring, specs
from replay.dataset import ReplayDataset
from replay.table import Table

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not os.path.isdir(shared_ring.SHM_DIR), reason="no /dev/shm")]


def _ring_files():
    return {n for n in os.listdir(shared_ring.SHM_DIR) if n.startswith("replay-ring-")}


@pytest.fixture
def client_ring():
    ring = shared_ring.ClientRing.create(1 << 20)
    assert ring is not None
    yield ring
    ring.close()


def test_the_server_side_writes_aligned_columns_the_client_reads_back(client_ring):
    server = shared_ring.ServerRing.open(client_ring.name, client_ring.nonce)
    assert server is not None
    columns = [b"a" * 100, b"b" * 3, bytes(range(256)) * 10]
    offsets, lengths, release = server.place(columns)
    assert lengths == [100, 3, 2560]
    assert all(offset % 64 == 0 for offset in offsets)
    assert [bytes(v) for v in client_ring.views(offsets, lengths)] == columns
    assert release >= sum(lengths)
    server.close()


def test_the_server_never_writes_over_bytes_not_given_back(client_ring):
    server = shared_ring.ServerRing.open(client_ring.name, client_ring.nonce)
    size = 400 * 1024
    first = server.place([b"x" * size])
    second = server.place([b"y" * size])
    assert first is not None and second is not None
    assert server.place([b"z" * size]) is None  # a 1 MB ring holds two, not three
    assert bytes(client_ring.views(*first[:2])[0]) == b"x" * size  # untouched by the refused one
    server.release(first[2] + 10**9)  # beyond what was handed out: ignored
    assert server.place([b"z" * size]) is None
    server.release(first[2])
    third = server.place([b"z" * size])
    assert third is not None and third[0] == first[0]  # wrapped to the start, where the first was
    assert bytes(client_ring.views(*second[:2])[0]) == b"y" * size
    server.release(first[2])  # again, after a later total: no change
    assert server.place([b"w" * size]) is None
    server.close()


def test_a_server_opens_only_a_ring_file_holding_the_nonce_it_was_sent(client_ring):
    assert shared_ring.ServerRing.open(client_ring.name, b"\0" * 16) is None
    assert shared_ring.ServerRing.open(client_ring.name, client_ring.nonce[:8]) is None
    assert shared_ring.ServerRing.open("../" + client_ring.name, client_ring.nonce) is None
    assert shared_ring.ServerRing.open("replay-ring-" + "0" * 32, client_ring.nonce) is None
    client_ring.unlink()  # named only until the server answered
    assert shared_ring.ServerRing.open(client_ring.name, client_ring.nonce) is None


def test_a_client_views_only_columns_inside_the_ring(client_ring):
    from replay import errors

    with pytest.raises(errors.DataLossError, match="outside"):
        client_ring.views([0], [10])  # the nonce's header
    with pytest.raises(errors.DataLossError, match="outside"):
        client_ring.views([1 << 20], [1])


def test_stream_ring_sizes_follow_the_budget_within_bounds():
    assert shared_ring.stream_ring_bytes(512, 4000) == 8 * 1024 * 1024
    assert 8 << 20 <= shared_ring.stream_ring_bytes(1024, 40_000) <= 96 << 20
    assert shared_ring.stream_ring_bytes(1024, 400_000) == 96 * 1024 * 1024
    assert shared_ring.stream_ring_bytes(64, None) == 0  # items of unknown size: no ring
    assert shared_ring.stream_ring_bytes(1, 4000) == 0  # a budget of a few kB: no ring


def _fill(client, table, steps):
    with client.trajectory_writer(1) as writer:
        for step in steps:
            writer.create_item(table, 1.0, writer.append(step))
        writer.flush()


@pytest.mark.parametrize("size, columnar", [(10_000, False), (500, True)])
def test_a_local_stream_receives_its_bytes_through_the_ring(start_server, size, columnar):
    server = start_server([Table.queue("q", 1000, signature=specs.TensorSpec((size,), np.float32))])
    client = server.localhost_client()
    steps = np.random.default_rng(0).random((300, size), dtype=np.float32)
    _fill(client, "q", steps)
    before = _ring_files()
    received, through_ring = [], 0
    responses = client.sample_responses("q", 300, timeout_ms=300, columnar=columnar, ring_bytes=32 << 20)
    for packed in responses:
        response = packed.response
        assert response.HasField("columns") == columnar
        if packed.release is not None:
            through_ring += 1
            assert not response.chunks.column_data and not response.columns.data
        data = (np.frombuffer(b"".join(bytes(c) for c in packed.column_data), np.float32)
                if packed.column_data else np.frombuffer(b"".join(response.columns.data), np.float32))
        received.append(data.reshape(-1, size).copy())
        if packed.release is not None:
            packed.release()
        if sum(len(r) for r in received) == 300:
            break
    responses.close()
    assert through_ring == len(received) >= 1
    np.testing.assert_array_equal(np.concatenate(received), steps)  # a queue: in order
    assert _ring_files() <= before  # nothing left behind


def test_a_full_ring_sends_responses_inline_until_the_reader_gives_bytes_back(start_server):
    size = 10_000  # 40 kB items; 1 MB ring: two 300 kB responses at most (the server's bound)
    server = start_server([Table.queue("q", 1000, signature=specs.TensorSpec((size,), np.float32))])
    client = server.localhost_client()
    steps = np.random.default_rng(1).random((200, size), dtype=np.float32)
    _fill(client, "q", steps)
    received, kinds, held = [], [], []
    responses = client.sample_responses("q", 8, timeout_ms=300, ring_bytes=1 << 20)
    for packed in responses:
        kinds.append(packed.release is not None)
        received.append(np.frombuffer(b"".join(bytes(c) for c in packed.column_data), np.float32)
                        .reshape(-1, size).copy())
        if packed.release is not None:
            held.append(packed.release)
        else:  # the ring is full: gives everything back at once, late
            for release in held:
                release()
            held = []
        if sum(len(r) for r in received) == 200:
            break
    responses.close()
    np.testing.assert_array_equal(np.concatenate(received), steps)
    assert kinds[0] and not all(kinds)  # the ring was used, then full (inline), then used again
    first_inline = kinds.index(False)
    assert any(kinds[first_inline:])


def test_datasets_read_the_same_items_with_and_without_the_ring(start_server):
    size = 10_000
    server = start_server([Table.queue("q", 1000, signature=specs.TensorSpec((size,), np.float32))])
    client = server.localhost_client()
    steps = np.random.default_rng(2).random((400, size), dtype=np.float32)
    before = _ring_files()
    for shared_memory in (True, False):
        _fill(client, "q", steps)
        dataset = ReplayDataset(client.address, "q", dtypes=np.float32, shapes=[size],
                                max_in_flight_samples_per_worker=64, rate_limiter_timeout_ms=300,
                                shared_memory=shared_memory)
        with dataset:
            values = np.concatenate([b.data.numpy() for b in dataset.batch(32)])
        np.testing.assert_array_equal(values, steps)
    deadline = time.monotonic() + 5
    while _ring_files() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ring_files() <= before
