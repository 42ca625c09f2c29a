"""Hundreds of open streams on one server: 256 writers, 16 samplers and a ReplayDataset learner
all make progress at once, every item is stored exactly once, and `server_info` keeps answering
throughout (no stream holds a server thread; the old server never answered it here)."""
import collections
import threading
import time

import numpy as np
import pytest

from replay import rate_limiters, selectors
from replay.server import Server
from replay.table import Table

pytestmark = pytest.mark.timeout(240)

NUM_WRITERS, NUM_SAMPLERS, ITEMS_PER_WRITER = 256, 16, 6


def test_256_writers_16_samplers_and_a_dataset_all_progress_together():
    import tensorflow as tf

    from replay.dataset import ReplayDataset

    table = Table("experience", selectors.Uniform(seed=0), selectors.Fifo(), 1_000_000, rate_limiters.MinSize(1))
    server = Server([table])
    failures = []
    stop = threading.Event()
    sampled = collections.Counter()
    probe_count = [0]
    all_open = threading.Barrier(NUM_WRITERS)

    def record(where):
        def wrap(fn):
            def run(*args):
                try:
                    fn(*args)
                except Exception as e:  # reported below; a thread cannot fail the test directly
                    failures.append((where, repr(e)))
            return run
        return wrap

    @record("writer")
    def write(writer_id):
        client = server.localhost_client()
        with client.trajectory_writer(num_keep_alive_refs=1, max_in_flight_items=4) as writer:
            writer.create_item("experience", 1.0, writer.append(np.array([writer_id, 0], np.int64)))
            writer.flush(timeout_ms=60_000)
            # Every writer's stream is open (and acked once) before any goes on: 256 streams at once.
            all_open.wait(timeout=90)
            for i in range(1, ITEMS_PER_WRITER):
                writer.create_item("experience", 1.0, writer.append(np.array([writer_id, i], np.int64)))
            writer.flush(timeout_ms=60_000)

    @record("sampler")
    def sample(sampler_id):
        client = server.localhost_client()
        while not stop.is_set():
            for infos, _ in client.sample_stream("experience", max_in_flight_samples=8,
                                                 rate_limiter_timeout_ms=5_000, max_samples=32, timeout=30):
                sampled[sampler_id] += len(infos["key"])

    @record("dataset")
    def learn():
        dataset = ReplayDataset(server.localhost_client().address, "experience", tf.int64, [2],
                                max_in_flight_samples_per_worker=16).batch(8)
        for batch in dataset:
            sampled["dataset"] += int(batch.data.shape[0])
            if stop.is_set():
                return

    @record("server_info")
    def probe():
        client = server.localhost_client()
        while not stop.is_set():
            # DeadlineExceededError if it stalls. The bound is generous so that a busy CI machine
            # does not fail it; the 1 s figure is what tools/soak_replay.py measures.
            client.server_info(timeout=5.0)
            probe_count[0] += 1
            time.sleep(0.05)

    try:
        writers = [threading.Thread(target=write, args=(w,)) for w in range(NUM_WRITERS)]
        readers = ([threading.Thread(target=sample, args=(s,)) for s in range(NUM_SAMPLERS)]
                   + [threading.Thread(target=learn), threading.Thread(target=probe)])
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join(timeout=150)
        # Readers run on until each of them has received samples (or time is up).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not failures and (
                len([k for k in sampled if sampled[k] > 0]) < NUM_SAMPLERS + 1):
            time.sleep(0.1)
        stop.set()
        for t in readers:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in writers + readers), "a thread is stuck"
        assert failures == []
        info = server.localhost_client().server_info(timeout=5)["experience"]
        total = NUM_WRITERS * ITEMS_PER_WRITER
        assert (info.num_inserts, info.current_size) == (total, total)  # nothing lost, nothing twice
        stored = {tuple(table.get(key).decode({})[0]) for key in table.keys()}
        assert stored == {(w, i) for w in range(NUM_WRITERS) for i in range(ITEMS_PER_WRITER)}
        assert all(sampled[s] > 0 for s in range(NUM_SAMPLERS)), dict(sampled)
        assert sampled["dataset"] > 0
        assert probe_count[0] > 0
    finally:
        stop.set()
        server.stop(grace=None)
