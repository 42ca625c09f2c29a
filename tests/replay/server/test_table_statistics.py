"""Table statistics (Reverb's `TableInfo` counters) over a real server on loopback.

The expected figures were recorded from dm-reverb 0.14 running the same operations (its
`table.cc` counts episodes through the episode ids of the chunks items reference, and an item
towards `num_unique_samples` the first time it is sampled)."""
import numpy as np
import pytest

import replay.reverb as reverb
from replay import rate_limiters, selectors
from replay.chunks import Chunk
from replay.items import Item, trajectory_from_chunks
from replay.table import Table

# Per table: current_size, num_episodes, num_deleted_episodes, num_unique_samples,
# rate_limiter_info.insert_stats.completed, rate_limiter_info.sample_stats.completed.
REVERB_0_14 = {
    "empty": {"fifo": [0, 0, 0, 0, 0, 0], "once": [0, 0, 0, 0, 0, 0], "q": [0, 0, 0, 0, 0, 0],
              "ratio": [0, 0, 0, 0, 0, 0]},
    "after episode 0": {"fifo": [3, 1, 0, 0, 3, 0], "once": [3, 1, 0, 0, 3, 0], "q": [0, 0, 0, 0, 0, 0],
                        "ratio": [3, 1, 0, 0, 3, 0]},
    "after episode 1": {"fifo": [5, 2, 0, 0, 6, 0], "once": [6, 2, 0, 0, 6, 0], "q": [0, 0, 0, 0, 0, 0],
                        "ratio": [6, 2, 0, 0, 6, 0]},
    "after episode 2": {"fifo": [5, 2, 1, 0, 9, 0], "once": [9, 3, 0, 0, 9, 0], "q": [0, 0, 0, 0, 0, 0],
                        "ratio": [9, 3, 0, 0, 9, 0]},
    "after inserts": {"fifo": [5, 4, 2, 0, 12, 0], "once": [9, 3, 0, 0, 9, 0], "q": [3, 3, 0, 0, 3, 0],
                      "ratio": [9, 3, 0, 0, 9, 0]},
    "after 5 samples of once": {"fifo": [5, 4, 2, 0, 12, 0], "once": [7, 3, 0, 3, 9, 5],
                                "q": [3, 3, 0, 0, 3, 0], "ratio": [9, 3, 0, 0, 9, 0]},
    "after 11 samples of once": {"fifo": [5, 4, 2, 0, 12, 0], "once": [4, 2, 1, 6, 9, 11],
                                 "q": [3, 3, 0, 0, 3, 0], "ratio": [9, 3, 0, 0, 9, 0]},
    "after q and fifo samples": {"fifo": [5, 4, 2, 1, 12, 7], "once": [4, 2, 1, 6, 9, 11],
                                 "q": [1, 1, 2, 2, 3, 2], "ratio": [9, 3, 0, 0, 9, 0]},
    "after mutate ratio": {"fifo": [5, 4, 2, 1, 12, 7], "once": [4, 2, 1, 6, 9, 11], "q": [1, 1, 2, 2, 3, 2],
                           "ratio": [8, 3, 0, 1, 9, 3]},
    "after reset": {"fifo": [5, 4, 2, 1, 12, 7], "once": [0, 0, 0, 0, 0, 0], "q": [0, 0, 0, 0, 0, 0],
                    "ratio": [8, 3, 0, 1, 9, 3]},
    "long items": {"fifo": [5, 4, 2, 1, 12, 7], "once": [2, 1, 0, 0, 2, 0], "q": [0, 0, 0, 0, 0, 0],
                   "ratio": [8, 3, 0, 1, 9, 3]},
}


@pytest.fixture
def server():
    tables = [
        reverb.Table("fifo", reverb.selectors.Fifo(), reverb.selectors.Fifo(), max_size=5,
                     rate_limiter=reverb.rate_limiters.MinSize(1)),
        reverb.Table("once", reverb.selectors.Fifo(), reverb.selectors.Fifo(), max_size=100,
                     rate_limiter=reverb.rate_limiters.MinSize(1), max_times_sampled=2),
        reverb.Table("ratio", reverb.selectors.Fifo(), reverb.selectors.Fifo(), max_size=100,
                     rate_limiter=reverb.rate_limiters.SampleToInsertRatio(2.0, 2, 100.0)),
        reverb.Table.queue("q", 10),
    ]
    srv = reverb.Server(tables)
    yield srv
    srv.stop()


def _statistics(client):
    out = {}
    for name, info in client.server_info().items():
        limiter = info.rate_limiter_info
        out[name] = [info.current_size, info.num_episodes, info.num_deleted_episodes, info.num_unique_samples,
                     limiter.insert_stats.completed, limiter.sample_stats.completed]
    return out


def test_statistics_follow_reverb_through_writes_samples_deletes_and_resets(server):
    client = reverb.Client(f"localhost:{server.port}")
    seen = {"empty": _statistics(client)}
    with client.trajectory_writer(4) as writer:
        for episode in range(3):
            for t in range(4):
                writer.append({"x": np.full([2], t, np.float32), "y": np.int64(episode)})
                if t >= 1:
                    writer.create_item("fifo", 1.0, {"x": writer.history["x"][-2:], "y": writer.history["y"][-1]})
                    writer.create_item("once", 1.0, {"x": writer.history["x"][-1], "y": writer.history["y"][-1]})
                    writer.create_item("ratio", 1.0, {"x": writer.history["x"][-1]})
            writer.end_episode()
            writer.flush()
            seen[f"after episode {episode}"] = _statistics(client)
    for i in range(3):
        client.insert(np.int32(i), {"fifo": 1.0, "q": 1.0})  # each insert is an episode of its own
    seen["after inserts"] = _statistics(client)
    list(client.sample("once", num_samples=5, emit_timesteps=False))
    seen["after 5 samples of once"] = _statistics(client)
    list(client.sample("once", num_samples=6, emit_timesteps=False))
    seen["after 11 samples of once"] = _statistics(client)
    list(client.sample("q", num_samples=2, emit_timesteps=False))
    list(client.sample("fifo", num_samples=7, emit_timesteps=False))
    seen["after q and fifo samples"] = _statistics(client)
    keys = [s.info.key for s in client.sample("ratio", num_samples=3, emit_timesteps=False)]
    client.mutate_priorities("ratio", updates={keys[0]: 2.0}, deletes=keys[1:])
    seen["after mutate ratio"] = _statistics(client)
    client.reset("once")
    client.reset("q")
    seen["after reset"] = _statistics(client)
    with client.trajectory_writer(10) as writer:
        for t in range(7):
            writer.append({"x": np.full([2], t, np.float32), "y": np.int64(t)})
        writer.create_item("once", 1.0, {"x": writer.history["x"][:], "y": writer.history["y"][-1]})
        writer.create_item("once", 1.0, {"x": writer.history["x"][0], "y": writer.history["y"][-1]})
    seen["long items"] = _statistics(client)
    assert seen == REVERB_0_14


def _item(key, episode_id):
    chunk = Chunk.from_columns(key + 1_000, [np.zeros([1, 2], np.float32)], episode_id=episode_id)
    return Item(key, 1.0, trajectory_from_chunks([chunk], 0, 1), {chunk.key: chunk})


def test_a_batch_that_evicts_counts_an_episode_deleted_when_one_insert_at_a_time_would():
    # Full table of an item of episode A and one of B; the batch brings one of B, then one of A.
    # One at a time: the first new item evicts A's only item (A is deleted), the second
    # references A again and evicts B's old item (B keeps the new one).
    table = Table("t", selectors.Fifo(), selectors.Fifo(), 2, rate_limiters.MinSize(1))
    table.insert_many([_item(1, episode_id=10), _item(2, episode_id=20)])
    done = table.try_insert_many(table.validate_items([_item(3, episode_id=20), _item(4, episode_id=10)]))
    info = table.info
    assert done == 2 and (info.size, info.num_episodes, info.num_deleted_episodes) == (2, 2, 1)


@pytest.mark.parametrize("seed", range(6))
def test_batches_that_evict_count_episodes_as_one_insert_at_a_time(seed):
    """Batches of random sizes over a few episodes (long-lived ones, counted per episode in bulk,
    and short ones whose counts reach zero inside a batch) into a full FIFO table: the episode
    counters and every episode's reference count are those of inserting the items one by one."""
    rng = np.random.default_rng(seed)
    bulk = Table("bulk", selectors.Uniform(seed=0), selectors.Fifo(), 40, rate_limiters.MinSize(1))
    single = Table("single", selectors.Uniform(seed=0), selectors.Fifo(), 40, rate_limiters.MinSize(1))
    key = 0
    for _ in range(30):
        size = int(rng.integers(1, 60))
        episodes = rng.choice([1, 2, 3, 100 + key], size=size, p=[0.4, 0.3, 0.2, 0.1])
        items = [_item(key + i, episode_id=int(e)) for i, e in enumerate(episodes)]
        key += size
        assert bulk.try_insert_many(bulk.validate_items(items)) == size
        for item in items:
            assert single.try_insert_many(single.validate_items([item])) == 1
        assert (bulk.info.num_episodes, bulk.info.num_deleted_episodes) == \
            (single.info.num_episodes, single.info.num_deleted_episodes)
        assert bulk._episode_refs == single._episode_refs  # noqa: SLF001 - the counts themselves
    assert bulk.info.num_deleted_episodes > 0


def test_statistics_survive_a_checkpoint_round_trip():
    table = Table("t", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1))
    table.insert_many([_item(k, episode_id=k // 2) for k in range(6)])
    table.mutate_priorities(deletes=[0, 1])  # episode 0 goes
    table.sample(3)
    before = table.info
    restored = Table.from_checkpoint(*table.checkpoint())
    after = restored.info
    assert (before.num_episodes, before.num_deleted_episodes, before.num_unique_samples) == (2, 1, 1)
    assert (after.num_episodes, after.num_deleted_episodes, after.num_unique_samples) == (2, 1, 1)
    restored.reset()
    assert (restored.info.num_episodes, restored.info.num_deleted_episodes, restored.info.num_unique_samples) == \
        (0, 0, 0)
