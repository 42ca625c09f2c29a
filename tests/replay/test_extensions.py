"""Table extensions: statistics counts and the priority-diffusion rule."""
import numpy as np
import pytest

from replay import errors
from replay.extensions import (PriorityDiffusionExtension, StatisticsExtension, TableExtension,
                               extension_from_config)
from replay.rate_limiters import MinSize
from replay.selectors import Fifo, Prioritized
from replay.table import Table


def test_statistics_counts_items_and_bytes(make_item, make_chunk):
    stats = StatisticsExtension()
    table = Table("t", Fifo(), Fifo(), 2, MinSize(1), max_times_sampled=2, extensions=[stats])
    chunk = make_chunk(length=6)
    items = [make_item(k, chunk=chunk, offset=k, length=1) for k in range(3)]
    for item in items:
        table.insert_or_assign(item)  # the third evicts the first
    table.sample()
    table.sample()  # item 1 reaches max_times_sampled
    table.mutate_priorities(updates={2: 4.0})
    info = table.info().extensions[0]
    assert info["kind"] == "StatisticsExtension"
    assert info["items_inserted"] == 3 and info["bytes_inserted"] == 3 * chunk.nbytes
    assert info["items_sampled"] == 2 and info["bytes_sampled"] == 2 * chunk.nbytes
    assert info["items_deleted"] == 2 and info["priority_updates"] == 1
    table.reset()
    assert table.info().extensions[0]["items_inserted"] == 0


def test_statistics_report_the_compression_ratio_of_each_chunk_once(make_item, make_chunk):
    """Items sharing a chunk count its bytes once; raw / stored bytes is the ratio lz4 reached on
    the chunk's columns (frames of one colour compress far, random bytes not at all)."""
    stats = StatisticsExtension()
    table = Table("t", Fifo(), Fifo(), 3, MinSize(1), extensions=[stats])
    frames = make_chunk(length=8, columns=[np.full((8, 84, 84), 7, np.uint8)])
    noise = make_chunk(length=8, columns=[np.random.default_rng(0).integers(0, 256, (8, 84, 84), np.uint8)])
    for k in range(2):
        table.insert_or_assign(make_item(k, chunk=frames, offset=k, length=1))
    info = table.info().extensions[0]
    assert info["chunks_inserted"] == 1 and info["bytes_inserted"] == 2 * frames.nbytes
    assert info["chunk_raw_bytes_inserted"] == frames.raw_nbytes == 8 * 84 * 84
    assert info["compression_ratio"] == pytest.approx(frames.raw_nbytes / frames.nbytes)
    assert info["compression_ratio"] > 100
    assert info["chunk_column_bytes_inserted"] == [frames.nbytes]
    assert info["chunk_column_raw_bytes_inserted"] == [frames.raw_nbytes]
    table.insert_or_assign(make_item(2, chunk=noise, offset=0, length=1))
    table.insert_or_assign(make_item(3, chunk=noise, offset=1, length=1))  # evicts item 0
    info = table.info().extensions[0]
    assert info["chunks_inserted"] == 2
    assert info["compression_ratio"] == pytest.approx(
        (frames.raw_nbytes + noise.raw_nbytes) / (frames.nbytes + noise.nbytes))
    assert info["chunk_bytes_live"] == frames.nbytes + noise.nbytes  # item 1 still holds frames
    table.insert_or_assign(make_item(4, chunk=noise, offset=2, length=1))  # evicts item 1
    info = table.info().extensions[0]
    assert info["chunk_bytes_live"] == noise.nbytes and info["chunk_raw_bytes_live"] == noise.raw_nbytes
    assert noise.nbytes == noise.raw_nbytes  # incompressible columns are stored raw


def episode_table(make_item, make_chunk, diffusion=0.5, max_distance=1, priorities=(1.0, 1.0, 1.0, 1.0, 1.0)):
    """Items 0..4 over consecutive steps of episode 7 (inserted out of order), item 100 in episode 8."""
    extension = PriorityDiffusionExtension(diffusion, max_distance)
    table = Table("t", Prioritized(1.0, seed=0), Fifo(), 100, MinSize(1), extensions=[extension])
    chunk = make_chunk(length=10, episode_id=7)
    for k in (3, 0, 4, 1, 2):
        table.insert_or_assign(make_item(k, priorities[k], chunk=chunk, offset=2 * k, length=2))
    other = make_chunk(length=4, episode_id=8)
    table.insert_or_assign(make_item(100, 1.0, chunk=other, offset=0, length=2))
    return table, extension


def priorities(table):
    return {k: table.get(k).priority for k in table.keys()}


def test_diffusion_blends_neighbours_of_the_same_episode_towards_the_update(make_item, make_chunk):
    table, extension = episode_table(make_item, make_chunk, diffusion=0.5, max_distance=2)
    assert extension.neighbours(2) == [0, 1, 2, 3, 4]
    table.mutate_priorities(updates={2: 9.0})
    got = priorities(table)
    # distance 1: w = 0.5 -> 0.5 * 1 + 0.5 * 9 = 5; distance 2: w = 0.25 -> 0.75 + 2.25 = 3.
    assert got == {3: 5.0, 0: 3.0, 4: 3.0, 1: 5.0, 2: 9.0, 100: 1.0}
    # The sampler sees the diffused priorities.
    assert table._sampler.probability(1) == pytest.approx(5.0 / sum(got.values()))


def test_diffusion_does_not_recurse_and_explicit_updates_win(make_item, make_chunk):
    table, extension = episode_table(make_item, make_chunk, diffusion=0.5, max_distance=1)
    table.mutate_priorities(updates=[(1, 5.0), (2, 9.0)])
    got = priorities(table)
    # 1 and 2 keep their explicit values; 0 gets 1's diffusion, 3 gets 2's; the diffused 0 and 3
    # do not diffuse further (4 stays 1).
    assert got[1] == 5.0 and got[2] == 9.0
    assert got[0] == 3.0 and got[3] == 5.0 and got[4] == 1.0
    assert table.info().extensions[0]["diffused_updates"] == 2


def test_diffusion_at_episode_edges_and_after_deletes(make_item, make_chunk):
    table, _ = episode_table(make_item, make_chunk, diffusion=0.5)
    table.mutate_priorities(updates={0: 3.0}, deletes=[1])
    got = priorities(table)
    assert got[0] == 3.0 and got[2] == 2.0  # 2 is now 0's right neighbour
    assert got[3] == 1.0 and got[100] == 1.0


def test_insert_or_assign_of_a_present_key_diffuses(make_item, make_chunk):
    table, _ = episode_table(make_item, make_chunk, diffusion=1.0)
    chunk = table.get(2).chunks
    existing = table.get(2)
    table.insert_or_assign(make_item(2, 4.0, chunk=next(iter(chunk.values())), offset=4, length=2))
    assert table.get(2) is existing
    got = priorities(table)
    assert got[1] == 4.0 and got[3] == 4.0 and got[0] == 1.0


def test_sampling_and_inserting_do_not_diffuse(make_item, make_chunk):
    table, _ = episode_table(make_item, make_chunk, priorities=(1.0, 2.0, 3.0, 4.0, 5.0))
    table.sample(num_samples=10)
    assert priorities(table) == {3: 4.0, 0: 1.0, 4: 5.0, 1: 2.0, 2: 3.0, 100: 1.0}


@pytest.mark.parametrize("build, match", [
    (lambda: PriorityDiffusionExtension(1.5), "diffusion"),
    (lambda: PriorityDiffusionExtension(-0.1), "diffusion"),
    (lambda: PriorityDiffusionExtension(0.5, 0), "max_distance"),
    (lambda: extension_from_config({"kind": "Unknown"}), "unknown table extension"),
    (lambda: extension_from_config({"kind": "StatisticsExtension", "x": 1}), "bad arguments"),
])
def test_bad_extension_arguments(build, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        build()


def test_an_extension_serves_one_table():
    stats = StatisticsExtension()
    Table("a", Fifo(), Fifo(), 5, MinSize(1), extensions=[stats])
    with pytest.raises(errors.InvalidArgumentError, match="already belongs to table 'a'"):
        Table("b", Fifo(), Fifo(), 5, MinSize(1), extensions=[stats])


@pytest.mark.parametrize("extension", [StatisticsExtension(), PriorityDiffusionExtension(0.3, 3)],
                         ids=lambda e: type(e).__name__)
def test_config_round_trip(extension):
    rebuilt = extension_from_config(extension.config())
    assert type(rebuilt) is type(extension) and rebuilt.config() == extension.config()


def test_hooks_run_inside_the_tables_atomic_operations(make_item):
    """A custom extension sees the table state of the operation it observes."""

    class Recorder(TableExtension):
        def __init__(self):
            super().__init__()
            self.events = []

        def on_insert(self, item):
            self.events.append(("insert", item.key, item.key in self.table._items and self.table._lock.locked()))

        def on_sample(self, item):
            self.events.append(("sample", item.key, item.times_sampled, self.table._lock.locked()))

        def on_delete(self, item):
            self.events.append(("delete", item.key, item.key in self.table._items))

        def on_update(self, item, old_priority):
            self.events.append(("update", item.key, old_priority, item.priority))

        def on_reset(self):
            self.events.append(("reset", len(self.table)))

    recorder = Recorder()
    table = Table("t", Fifo(), Fifo(), 1, MinSize(1), max_times_sampled=1, extensions=[recorder])
    table.insert_or_assign(make_item(1, 2.0))
    table.insert_or_assign(make_item(2))
    table.mutate_priorities({2: 3.0})
    table.sample()
    table.reset()
    assert recorder.events == [("insert", 1, True), ("insert", 2, True), ("delete", 1, False),
                               ("update", 2, 1.0, 3.0), ("sample", 2, 1, True), ("delete", 2, False), ("reset", 0)]
