"""The server's optional garbage-collection policy (replay.gc_freeze): objects alive leave the
collector's view, cyclic garbage among them is still collected by the periodic full pass, and a
server started with freeze_gc serves and gives the frozen objects back when it stops."""
import asyncio
import gc
import time
import weakref

import numpy as np

from replay import Fifo, MinSize, Server, Table, Uniform
from replay import gc_freeze
from replay.gc_freeze import GcFreezer


class _Node:
    def __init__(self):
        self.other = None


def _run(loop, seconds):
    loop.run_until_complete(asyncio.sleep(seconds))


def test_frozen_cycles_are_collected_by_the_full_pass():
    loop = asyncio.new_event_loop()
    try:
        freezer = GcFreezer(loop, interval=0.02, full_every=0.3)
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle: only the collector can free it
        alive = weakref.ref(a)
        freezer.start()
        _run(loop, 0.1)
        assert freezer.freezes >= 1 and gc.get_freeze_count() > 0
        del a, b
        gc.collect()  # automatic and explicit collections no longer see the frozen cycle
        assert alive() is not None
        _run(loop, 0.5)  # the full pass unfreezes and collects
        assert freezer.full_collections >= 1
        assert alive() is None
        freezer.stop()
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        loop.close()


def test_young_cycles_are_still_collected_automatically_while_full_collections_wait():
    loop = asyncio.new_event_loop()
    before = gc.get_threshold()
    freezer = GcFreezer(loop, interval=60.0, full_every=600.0)
    try:
        freezer.start()
        young, middle, full = gc.get_threshold()
        assert (young, middle, full) == gc_freeze._THRESHOLDS
        gc.collect(0)  # the young generation's allocation count starts at zero
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        garbage = [[] for _ in range(young + 100)]  # enough allocations for one young collection
        assert alive() is None  # found by an automatic young collection, no explicit call
        del garbage
    finally:
        freezer.stop()
        loop.close()
        gc.unfreeze()
    assert gc.get_threshold() == before


def test_server_with_freeze_gc_serves_and_unfreezes_on_stop():
    table = Table("t", Uniform(seed=0), Fifo(), 1000, MinSize(1))
    before = gc.get_threshold()
    server = Server([table], freeze_gc=True)
    try:
        assert gc.get_threshold() == gc_freeze._THRESHOLDS
        client = server.localhost_client()
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for i in range(300):
                writer.append(np.full(4, i, np.float32))
                writer.create_item("t", 1.0, writer.history[-1])
        deadline = time.monotonic() + 5
        while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gc.get_freeze_count() > 0  # the policy runs
        values = {float(s.data[0][0]) for s in client.sample("t", 50,
                                                             emit_timesteps=False, unpack_as_table_signature=True)}
        assert values <= set(range(300)) and len(table) == 300
    finally:
        server.stop()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before  # the process's collector settings come back


def test_freezing_freezes_what_its_step_leaves_alive_after_a_young_collection():
    loop = asyncio.new_event_loop()
    freezer = GcFreezer(loop, interval=60.0, full_every=600.0)
    try:
        freezer.start()
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        garbage = weakref.ref(a)  # made before the step: the step's young collection frees it
        del a, b
        kept = freezer.freezing(lambda n: [_Node() for _ in range(n)], 50)
        assert garbage() is None
        assert len(kept) == 50 and freezer.step_freezes == 1
        tracked = {id(o) for o in gc.get_objects()}  # the frozen generation is not listed
        assert not any(id(node) in tracked for node in kept)
        assert gc.get_freeze_count() >= 50
    finally:
        freezer.stop()
        loop.close()
        gc.unfreeze()


def test_items_a_freeze_gc_server_inserts_are_frozen_with_their_message():
    table = Table("t", Uniform(seed=0), Fifo(), 1000, MinSize(1))
    server = Server([table], freeze_gc=True)
    try:
        client = server.localhost_client()
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for i in range(200):
                writer.append(np.full(4, i, np.float32))
                writer.create_item("t", 1.0, writer.history[-1])
                if i % 40 == 39:
                    writer.flush()  # one message each
        assert len(table) == 200
        assert server._gc_freezer.step_freezes >= 5  # noqa: SLF001 - one per insert message
        items = list(table._items.values())  # noqa: SLF001 - the stored objects
        tracked = {id(o) for o in gc.get_objects()}
        assert not any(id(item) in tracked for item in items)
        values = {float(s.data[0][0]) for s in client.sample("t", 50,
                                                             emit_timesteps=False, unpack_as_table_signature=True)}
        assert values <= set(range(200))
    finally:
        server.stop()
    assert gc.get_freeze_count() == 0


def test_a_server_runs_the_policy_by_default_and_leaves_the_collector_alone_when_told():
    gc.unfreeze()
    thresholds = gc.get_threshold()
    server = Server([Table("t", Uniform(), Fifo(), 10, MinSize(1))], freeze_gc=False)
    try:
        time.sleep(1.3)
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    finally:
        server.stop()
    server = Server([Table("t", Uniform(), Fifo(), 10, MinSize(1))])
    try:
        time.sleep(1.3)
        assert gc.get_freeze_count() > 0 and gc.get_threshold() != thresholds
    finally:
        server.stop()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
