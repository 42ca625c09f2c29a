"""ChunkStore: lookup, de-duplication, and release of chunk memory when the last item goes."""
import gc
import threading
import weakref

import pytest

from replay import errors
from replay.chunk_store import ChunkStore
from replay.items import Item, trajectory_from_chunks
from replay.rate_limiters import MinSize
from replay.selectors import Fifo, Uniform
from replay.table import Table


def test_insert_get_and_reuse_of_existing_keys(make_chunk):
    store = ChunkStore()
    a, b = make_chunk(key=1), make_chunk(key=2)
    assert store.insert([a, b]) == [a, b]
    duplicate = make_chunk(key=1)
    assert store.insert([duplicate])[0] is a  # the stored object is reused
    assert store.get([2, 1]) == [b, a]
    assert len(store) == 2 and 1 in store and 3 not in store
    with pytest.raises(errors.NotFoundError, match=r"\[3, 4\]"):
        store.get([1, 3, 4])


def test_chunks_are_released_when_the_items_referencing_them_are_gone(make_chunk):
    store = ChunkStore()
    table_a = Table("a", Fifo(), Fifo(), 2, MinSize(1), max_times_sampled=1)
    table_b = Table("b", Uniform(seed=0), Fifo(), 10, MinSize(1))
    chunks = store.insert([make_chunk(length=4, start_index=4 * i) for i in range(3)])
    refs = [weakref.ref(c) for c in chunks]
    # Items of two tables overlap: they share the chunks rather than copy them.
    for k in range(2):
        pair = chunks[k:k + 2]
        for table in (table_a, table_b):
            table.insert_or_assign(Item(k, 1.0, trajectory_from_chunks(pair, 2, 4), {c.key: c for c in pair}))
    del chunks, pair
    gc.collect()
    assert len(store) == 3
    table_a.sample()
    table_a.sample()  # both items of table a reach max_times_sampled
    assert len(table_a) == 0 and len(store) == 3  # table b still references all three
    table_b.mutate_priorities(deletes=[0])
    assert len(store) == 2 and refs[0]() is None  # chunk 0 was only used by item 0
    table_b.reset()
    assert len(store) == 0
    assert all(ref() is None for ref in refs)


def test_eviction_releases_chunks(make_chunk):
    store = ChunkStore()
    table = Table("t", Fifo(), Fifo(), 3, MinSize(1))
    for k in range(50):
        chunk, = store.insert([make_chunk(length=2)])
        table.insert_or_assign(Item(k, 1.0, trajectory_from_chunks([chunk], 0, 2), {chunk.key: chunk}))
    del chunk
    assert len(store) == 3
    assert sorted(store.keys()) == sorted(next(iter(table.get(k).chunks)) for k in table.keys())


def test_concurrent_inserts_keep_one_object_per_key(make_chunk):
    store = ChunkStore()
    candidates = [[make_chunk(key=k) for k in range(200)] for _ in range(4)]
    results = [None] * 4

    def insert(i):
        results[i] = store.insert(candidates[i])

    threads = [threading.Thread(target=insert, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for k in range(200):
        assert len({id(r[k]) for r in results}) == 1
    assert len(store) == 200


def test_entries_of_dead_chunks_are_swept_so_the_store_stays_small(make_chunk):
    # Writers send chunks that die soon after (items evicted); the store must not keep an
    # entry per chunk ever inserted.
    from replay import chunk_store

    store = ChunkStore()
    kept = store.insert([make_chunk(key=-1)])
    for k in range(3 * chunk_store._MIN_SWEEP_ENTRIES):
        store.insert([make_chunk(key=k)])  # nothing holds it: it dies at once
    assert len(store) == 1 and store.keys() == [-1] and store.get([-1]) == kept
    assert len(store._chunks) <= chunk_store._MIN_SWEEP_ENTRIES
