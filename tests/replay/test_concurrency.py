"""Many threads on one table: nothing is lost or counted twice."""
import random
import threading
import time

import pytest

from replay import errors
from replay.extensions import StatisticsExtension, TableExtension
from replay.rate_limiters import MinSize, SampleToInsertRatio
from replay.selectors import Fifo, MinHeap, Prioritized, Uniform
from replay.table import Table

pytestmark = pytest.mark.timeout(120)


class RemovalLog(TableExtension):
    """Records every removed key (deleted, evicted or sampled out)."""

    def __init__(self):
        super().__init__()
        self.removed = []

    def on_delete(self, item):
        self.removed.append(item.key)

    def on_reset(self):
        raise AssertionError("not expected in this test")


def hammer(table, make_item, chunk, run_seconds=2.0, ops_per_thread=1500, min_inserts=150, max_seconds=30.0):
    """4 inserters, 3 samplers and 1 priority mutator run until each finished its operations or the
    time is up. The time is extended (up to max_seconds) until the table has taken min_inserts, so a
    loaded machine still exercises it. Returns (keys inserted, keys seen in samples, errors raised in
    threads)."""
    started = time.monotonic()
    deadline = [started + run_seconds]  # read by the threads, extended by this one

    def running():
        return time.monotonic() < deadline[0]
    inserted, sampled, failures = [], [], []
    lock = threading.Lock()

    def inserter(worker):
        rng = random.Random(worker)
        mine = []
        try:
            key, done = worker * 1_000_000, 0
            while done < ops_per_thread and running():
                if rng.random() < 0.3:
                    batch = [make_item(key + i, rng.uniform(0.1, 5.0), chunk=chunk) for i in range(5)]
                    try:
                        table.insert_many(batch, timeout=0.2)
                        mine.extend(item.key for item in batch)
                    except errors.DeadlineExceededError as e:  # the leading ones are in
                        count = int(str(e).rsplit("(", 1)[1].split(" of ")[0])
                        mine.extend(item.key for item in batch[:count])
                    key, done = key + 5, done + 5
                else:
                    try:
                        table.insert_or_assign(make_item(key, rng.uniform(0.1, 5.0), chunk=chunk), timeout=0.2)
                        mine.append(key)
                    except errors.DeadlineExceededError:
                        pass
                    key, done = key + 1, done + 1
        except Exception as e:
            failures.append(e)
        with lock:
            inserted.extend(mine)

    def sampler(worker):
        seen = []
        try:
            done = 0
            while done < ops_per_thread and running():
                try:
                    seen.extend(s.item.key for s in table.sample(num_samples=4, timeout=0.2))
                except errors.DeadlineExceededError:
                    pass
                done += 1
        except Exception as e:
            failures.append(e)
        with lock:
            sampled.extend(seen)

    def mutator():
        rng = random.Random(99)
        try:
            done = 0
            while done < ops_per_thread and running():
                keys = table.keys()
                if keys:
                    picks = rng.sample(keys, min(4, len(keys)))
                    table.mutate_priorities(updates={k: rng.uniform(0.0, 3.0) for k in picks[1:]}, deletes=picks[:1])
                done += 1
        except Exception as e:
            failures.append(e)

    threads = ([threading.Thread(target=inserter, args=(w,)) for w in range(1, 5)]
               + [threading.Thread(target=sampler, args=(w,)) for w in range(3)]
               + [threading.Thread(target=mutator)])
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) and time.monotonic() < started + max_seconds:
        time.sleep(0.1)
        if table.info().num_inserts < min_inserts:
            deadline[0] = max(deadline[0], min(time.monotonic() + 0.5, started + max_seconds))
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    return inserted, sampled, failures


@pytest.mark.parametrize("build", [
    lambda extensions: Table("min_size", Prioritized(0.7, seed=1), Fifo(), 300, MinSize(10), max_times_sampled=3,
                             extensions=extensions),
    lambda extensions: Table("ratio", Uniform(seed=2), MinHeap(), 200, SampleToInsertRatio(1.5, 20, 30.0),
                             max_times_sampled=0, extensions=extensions),
], ids=["prioritized-min-size", "uniform-ratio"])
def test_eight_threads_lose_nothing(build, make_item, make_chunk):
    log, stats = RemovalLog(), StatisticsExtension()
    table = build([log, stats])
    chunk = make_chunk(length=2)
    inserted, sampled, failures = hammer(table, make_item, chunk)
    assert not failures
    info = table.info()
    present = set(table.keys())
    removed = set(log.removed)
    assert len(inserted) == len(set(inserted)) == info.num_inserts > 100
    assert info.num_inserts == info.size + info.num_evictions + info.num_deletes
    assert len(log.removed) == len(removed) == info.num_evictions + info.num_deletes
    assert present | removed == set(inserted) and not present & removed
    assert set(sampled) <= set(inserted) and len(sampled) == info.num_samples > 0
    assert len(table._sampler) == len(table._remover) == info.size
    assert info.extensions[1]["items_inserted"] == info.num_inserts
    assert info.extensions[1]["items_sampled"] == info.num_samples
    limiter = info.rate_limiter_info
    assert (limiter["insert_count"], limiter["sample_count"], limiter["delete_count"]) == (
        info.num_inserts, info.num_samples, info.num_evictions + info.num_deletes)
