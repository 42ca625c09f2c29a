"""Table: insertion, eviction, deletion at max_times_sampled, priorities, reset, info, bad input,
configuration and checkpoint round-trips."""
import json
import subprocess
import sys

import numpy as np
import pytest

from replay import errors
from replay.extensions import PriorityDiffusionExtension, StatisticsExtension
from replay.items import Item
from replay.rate_limiters import MinSize, RateLimiter, SampleToInsertRatio
from replay.selectors import Fifo, Lifo, MaxHeap, MinHeap, Prioritized, Uniform
from replay.specs import TensorSpec
from replay.table import Table


def snapshot(table):
    """Everything observable about a table's contents and counters."""
    info = table.info()
    items = [(k, table.get(k).priority, table.get(k).times_sampled) for k in table.keys()]
    return items, (info.num_inserts, info.num_samples, info.num_deletes, info.num_evictions,
                   info.num_updates), info.rate_limiter_info


def test_replay_core_imports_without_tensorflow():
    code = ("import sys, replay, replay.errors, replay.specs, replay.chunks, replay.items, replay.chunk_store, "
            "replay.selectors, replay.rate_limiters, replay.extensions, replay.table; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_insert_evicts_through_the_remover_at_max_size(make_item):
    table = Table("t", Uniform(seed=0), Fifo(), 3, MinSize(1))
    for k in range(5):
        table.insert_or_assign(make_item(k))
    assert table.keys() == [2, 3, 4]
    info = table.info()
    assert (info.size, info.num_inserts, info.num_evictions, info.num_deletes) == (3, 5, 2, 0)
    assert info.rate_limiter_info["delete_count"] == 2


def test_remover_heap_evicts_the_lowest_priority(make_item):
    table = Table("t", Uniform(seed=0), MinHeap(), 2, MinSize(1))
    for k, p in [(1, 5.0), (2, 1.0), (3, 3.0)]:
        table.insert_or_assign(make_item(k, p))
    assert sorted(table.keys()) == [1, 3]


def test_items_are_deleted_when_sampled_max_times(make_item):
    table = Table("t", Fifo(), Fifo(), 10, MinSize(1), max_times_sampled=3)
    table.insert_or_assign(make_item(1))
    table.insert_or_assign(make_item(2))
    seen = [table.sample()[0] for _ in range(4)]
    assert [(s.item.key, s.times_sampled) for s in seen] == [(1, 1), (1, 2), (1, 3), (2, 1)]
    assert table.keys() == [2]
    info = table.info()
    assert (info.num_samples, info.num_deletes, info.num_evictions) == (4, 1, 0)


def test_sample_reports_state_at_sampling_and_takes_a_flexible_batch(make_item):
    table = Table("t", Prioritized(1.0, seed=1), Fifo(), 10, SampleToInsertRatio(1.0, 1, (0.0, 10.0)))
    table.insert_or_assign(make_item(1, 1.0))
    table.insert_or_assign(make_item(2, 3.0))
    # The cursor is 2 (two inserts, spi 1): only two samples are allowed without waiting.
    batch = table.sample(num_samples=5, timeout=1)
    assert len(batch) == 2
    for sample in batch:
        expected = {1: 0.25, 2: 0.75}[sample.item.key]
        assert sample.probability == pytest.approx(expected)
        assert sample.table_size == 2
        assert sample.priority == {1: 1.0, 2: 3.0}[sample.item.key]
    with pytest.raises(errors.DeadlineExceededError):
        table.sample(timeout=0)


def test_insert_or_assign_of_a_present_key_updates_only_its_priority(make_item):
    table = Table("t", MaxHeap(), Fifo(), 10, MinSize(1))
    table.insert_or_assign(make_item(1, 1.0))
    table.insert_or_assign(make_item(2, 2.0))
    original = table.get(1)
    table.insert_or_assign(make_item(1, 9.0))
    assert table.get(1) is original and original.priority == 9.0
    assert table.sample()[0].item.key == 1
    info = table.info()
    assert (info.size, info.num_inserts, info.num_updates) == (2, 2, 1)


def test_mutate_priorities_deletes_first_and_ignores_unknown_keys(make_item):
    table = Table("t", MaxHeap(), Fifo(), 10, MinSize(1))
    for k in range(4):
        table.insert_or_assign(make_item(k, 1.0))
    table.mutate_priorities(updates={0: 5.0, 3: 7.0, 99: 1.0}, deletes=[3, 77])
    assert table.keys() == [0, 1, 2]
    assert table.get(0).priority == 5.0
    assert table.sample()[0].item.key == 0
    table.mutate_priorities(updates=[(1, 8.0)])
    assert table.sample()[0].item.key == 1
    info = table.info()
    assert (info.num_deletes, info.num_updates) == (1, 2)


def test_reset_clears_items_selectors_and_counters_and_wakes_inserters(make_item):
    table = Table.queue("q", 2)
    table.insert_or_assign(make_item(1))
    table.insert_or_assign(make_item(2))
    with pytest.raises(errors.DeadlineExceededError):
        table.insert_or_assign(make_item(3), timeout=0)
    table.reset()
    info = table.info()
    assert (info.size, info.num_inserts, info.num_samples) == (0, 0, 0)
    assert info.rate_limiter_info["insert_count"] == 0
    table.insert_or_assign(make_item(3), timeout=0)
    table.insert_or_assign(make_item(4), timeout=0)
    assert [table.sample()[0].item.key for _ in range(2)] == [3, 4]


def test_queue_and_stack_orders(make_item):
    queue, stack = Table.queue("q", 5), Table.stack("s", 5)
    for k in range(5):
        queue.insert_or_assign(make_item(k))
        stack.insert_or_assign(make_item(k))
    assert [queue.sample()[0].item.key for _ in range(5)] == [0, 1, 2, 3, 4]
    assert [stack.sample()[0].item.key for _ in range(5)] == [4, 3, 2, 1, 0]
    assert len(queue) == len(stack) == 0


def test_insert_many_inserts_in_order_and_validates_all_first(make_item):
    table = Table("t", Fifo(), Fifo(), 10, MinSize(1))
    table.insert_many([make_item(k) for k in range(3)])
    assert table.keys() == [0, 1, 2]
    batch = [make_item(10), make_item(11, -1.0), make_item(12)]
    before = snapshot(table)
    with pytest.raises(errors.InvalidArgumentError, match="item 11"):
        table.insert_many(batch)
    assert snapshot(table) == before


def test_insert_many_timeout_reports_how_many_were_inserted(make_item):
    table = Table.queue("q", 2)
    with pytest.raises(errors.DeadlineExceededError, match="2 of 3 items"):
        table.insert_many([make_item(k) for k in range(3)], timeout=0.05)
    assert table.keys() == [0, 1]


def test_info_describes_configuration_and_extensions(make_item):
    table = Table("t", Prioritized(0.6), MinHeap(), 7, SampleToInsertRatio(2.0, 3, 10.0), max_times_sampled=4,
                  extensions=[StatisticsExtension()])
    table.insert_or_assign(make_item(1))
    info = table.info()
    assert info.name == "t" and info.max_size == 7 and info.max_times_sampled == 4
    assert info.sampler_options == {"kind": "Prioritized", "priority_exponent": 0.6}
    assert info.remover_options == {"kind": "MinHeap"}
    assert info.rate_limiter_info["min_diff"] == -4.0 and info.rate_limiter_info["insert_count"] == 1
    assert info.extensions[0]["items_inserted"] == 1


# -- bad input: named errors, nothing changes ----------------------------------------------------


def populated_table(make_item, signature=None):
    obs_spec = {"obs": TensorSpec((None, 3), np.float32), "step": TensorSpec((None,), np.int64)}
    table = Table("t", Prioritized(1.0, seed=3), Fifo(), 10, MinSize(1),
                  signature=obs_spec if signature is None else signature)
    for k in range(3):
        table.insert_or_assign(make_item(k, 1.0 + k, length=2))
    return table


@pytest.mark.parametrize("priority", [-0.5, float("nan"), float("inf")])
def test_bad_priority_on_insert_raises_and_changes_nothing(make_item, priority):
    table = populated_table(make_item)
    before = snapshot(table)
    with pytest.raises(errors.InvalidArgumentError, match="priority"):
        table.insert_or_assign(make_item(5, priority, length=2))
    with pytest.raises(errors.InvalidArgumentError, match="priority"):
        table.insert_or_assign(make_item(1, priority, length=2))  # present key: an update
    assert snapshot(table) == before


@pytest.mark.parametrize("priority", [-1.0, float("nan"), float("inf"), "x"])
def test_bad_priority_in_mutate_priorities_changes_nothing(make_item, priority):
    table = populated_table(make_item)
    before = snapshot(table)
    with pytest.raises(errors.InvalidArgumentError):
        table.mutate_priorities(updates=[(0, 4.0), (1, priority)], deletes=[2])
    assert snapshot(table) == before


def test_signature_mismatches_raise_and_change_nothing(make_item, make_chunk):
    table = populated_table(make_item)
    before = snapshot(table)
    # Structure: one column instead of two.
    chunk = make_chunk(columns=[np.zeros((2, 3), np.float32)])
    with pytest.raises(errors.SignatureMismatchError, match="1 columns but the signature has 2"):
        table.insert_or_assign(make_item(7, chunk=chunk, length=2))
    # Dtype: float64 observations.
    chunk = make_chunk(columns=[np.zeros((2, 3), np.float64), np.zeros(2, np.int64)])
    with pytest.raises(errors.SignatureMismatchError, match="float64"):
        table.insert_or_assign(make_item(8, chunk=chunk, length=2))
    # Shape: observations of shape (4,).
    chunk = make_chunk(columns=[np.zeros((2, 4), np.float32), np.zeros(2, np.int64)])
    with pytest.raises(errors.SignatureMismatchError, match=r"\(2, 4\)"):
        table.insert_or_assign(make_item(9, chunk=chunk, length=2))
    assert snapshot(table) == before


def test_unknown_chunk_key_in_a_slice_raises_not_found_and_changes_nothing(make_item, make_chunk):
    table = populated_table(make_item)
    before = snapshot(table)
    chunk = make_chunk(length=2)
    trajectory = [(False, ((chunk.key, 0, 2, 0),)), (False, ((424242, 0, 2, 1),))]
    with pytest.raises(errors.NotFoundError, match="424242"):
        table.insert_or_assign(Item(20, 1.0, trajectory, {chunk.key: chunk}))
    out_of_range = [(False, ((chunk.key, 1, 2, 0),)), (False, ((chunk.key, 0, 2, 1),))]
    with pytest.raises(errors.InvalidArgumentError, match="outside"):
        table.insert_or_assign(Item(21, 1.0, out_of_range, {chunk.key: chunk}))
    assert snapshot(table) == before


@pytest.mark.parametrize("build, match", [
    (lambda: Table("t", Fifo(), Fifo(), 0, MinSize(1)), "max_size"),
    (lambda: Table("t", Fifo(), Fifo(), -5, MinSize(1)), "max_size"),
    (lambda: Table("t", Fifo(), Fifo(), 5, MinSize(1), max_times_sampled=-1), "max_times_sampled"),
    (lambda: Table.queue("q", 0), "max_size"),
    (lambda: Table.stack("s", -2), "max_size"),
    (lambda: Table("", Fifo(), Fifo(), 5, MinSize(1)), "name"),
    (lambda: Table("t", "fifo", Fifo(), 5, MinSize(1)), "sampler"),
    (lambda: Table("t", Fifo(), Fifo(), 5, "min size"), "rate_limiter"),
])
def test_bad_table_arguments_raise_invalid_argument(build, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        build()


def test_bad_sample_arguments(make_item):
    table = populated_table(make_item)
    before = snapshot(table)
    for bad in (0, -1):
        with pytest.raises(errors.InvalidArgumentError, match="num_samples"):
            table.sample(bad)
    with pytest.raises(errors.InvalidArgumentError, match="timeout"):
        table.sample(1, timeout=-1)
    assert snapshot(table) == before
    with pytest.raises(errors.NotFoundError, match="no item with key 55"):
        table.get(55)


# -- configuration and checkpoints ---------------------------------------------------------------


def full_config_table():
    signature = {"obs": TensorSpec((None, 3), np.float32, "obs"), "step": TensorSpec((None,), np.int64)}
    return Table("replay", Prioritized(0.8), MinHeap(), 50, SampleToInsertRatio(2.0, 5, 40.0), max_times_sampled=3,
                 extensions=[StatisticsExtension(), PriorityDiffusionExtension(0.25, 2)], signature=signature)


def test_config_is_json_and_round_trips():
    table = full_config_table()
    config = json.loads(json.dumps(table.config()))
    rebuilt = Table.from_config(config)
    assert rebuilt.config() == table.config()
    assert rebuilt.signature["obs"] == table.signature["obs"]


def test_from_config_accepts_a_hand_written_signature_and_min_size_limiter():
    config = {"name": "h", "sampler": {"kind": "Uniform"}, "remover": {"kind": "Fifo"}, "max_size": 10,
              "rate_limiter": {"kind": "MinSize", "min_size_to_sample": 1},
              "signature": {"obs": {"shape": [4], "dtype": "float32"}, "done": {"shape": [], "dtype": "bool"}}}
    table = Table.from_config(config)
    assert table.signature["obs"] == TensorSpec((4,), np.float32)
    assert table.signature["done"].dtype == np.bool_


@pytest.mark.parametrize("change, field", [
    (lambda c: c.pop("max_size"), "max_size"),
    (lambda c: c.update(sampler={"kind": "Bogus"}), "sampler"),
    (lambda c: c.update(remover={"kind": "Prioritized", "priority_exponent": -1}), "remover"),
    (lambda c: c.update(rate_limiter={"kind": "SampleToInsertRatio", "samples_per_insert": 1,
                                      "min_size_to_sample": 1, "error_buffer": 0.1}), "rate_limiter"),
    (lambda c: c.update(extensions=[{"kind": "Nope"}]), "extensions"),
    (lambda c: c.update(signature={"obs": 3}), "signature"),
    (lambda c: c.update(max_size=0), "max_size"),
    (lambda c: c.update(colour="red"), "colour"),
])
def test_from_config_names_the_bad_field(change, field):
    config = full_config_table().config()
    change(config)
    with pytest.raises(errors.InvalidArgumentError, match=field):
        Table.from_config(config)


def test_checkpoint_round_trips_items_priorities_counters_and_order(make_item, make_chunk):
    table = full_config_table()
    episode_chunk = make_chunk(length=10, episode_id=1)
    for k in range(12):
        table.insert_or_assign(make_item(k, 1.0 + k, chunk=episode_chunk, offset=k % 9, length=1 + (k % 2)), timeout=5)
    table.sample(num_samples=6, timeout=5)
    table.mutate_priorities(updates={4: 20.0}, deletes=[7])
    config, items, counters = table.checkpoint()
    # The snapshot is consistent and detached from later changes.
    table.mutate_priorities(updates={0: 99.0})
    restored = Table.from_checkpoint(json.loads(json.dumps(config)), items, json.loads(json.dumps(counters)))
    assert restored.keys() == [k for k in range(12) if k != 7 and k in {i.key for i in items}]
    assert restored.keys() == [i.key for i in items]
    for item in items:
        got = restored.get(item.key)
        assert ((got.priority, got.times_sampled, got.inserted_at)
                == (item.priority, item.times_sampled, item.inserted_at))
        assert [np.asarray(c).tolist() for c in got.decode()] == [np.asarray(c).tolist() for c in item.decode()]
    assert restored.get(0).priority == 1.0  # the change after checkpoint() is not in it
    old, new = table.info(), restored.info()
    assert (new.num_inserts, new.num_samples, new.num_deletes, new.num_evictions) == (
        old.num_inserts, old.num_samples, old.num_deletes, old.num_evictions)
    assert new.extensions[0] == {**old.extensions[0], "priority_updates": old.extensions[0]["priority_updates"] - 1}
    assert restored.config() == table.config()


def test_load_checkpoint_refills_a_live_table_and_wakes_its_blocked_sampler(make_item):
    import threading

    source = Table("t", Prioritized(1.0, seed=1), Fifo(), 100, MinSize(3))
    for k in range(5):
        source.insert_or_assign(make_item(k, 1.0 + k), timeout=5)
    source.sample(num_samples=2, timeout=5)
    source.mutate_priorities(updates={3: 9.0})
    config, items, counters = source.checkpoint()

    live = Table("t", Prioritized(1.0, seed=1), Fifo(), 100, MinSize(3))
    live.insert_or_assign(make_item(99, 1.0), timeout=5)  # replaced by the checkpoint's items
    got = []
    sampler = threading.Thread(target=lambda: got.extend(live.sample(num_samples=1, timeout=10)))
    sampler.start()  # blocked: one item, the rate limiter wants three
    live.load_checkpoint(items, counters)
    sampler.join(10)
    assert not sampler.is_alive() and got and got[0].item.key in range(5)
    assert sorted(live.keys()) == list(range(5))
    for item in items:
        restored = live.get(item.key)
        assert restored.priority == item.priority
        assert restored.times_sampled >= item.times_sampled
    info = live.info()
    assert info.num_inserts == source.info().num_inserts and info.num_updates == source.info().num_updates
    with pytest.raises(errors.InvalidArgumentError, match="repeats item key"):
        live.load_checkpoint([make_item(1), make_item(1)], {})
    assert sorted(live.keys()) == list(range(5))  # a refused checkpoint changes nothing


def test_load_checkpoint_reports_progress_and_a_raising_progress_changes_nothing(make_item):
    items = [make_item(k, 1.0) for k in range(10_000)]
    live = Table("t", Uniform(seed=1), Fifo(), 20_000, MinSize(1))
    live.insert_or_assign(make_item(99_999, 1.0), timeout=5)
    seen = []

    def stop_at_the_third_report(checked):
        seen.append(checked)
        if len(seen) == 3:
            raise errors.DeadlineExceededError("restore timeout")

    with pytest.raises(errors.DeadlineExceededError):
        live.load_checkpoint(items, {}, stop_at_the_third_report)
    assert seen == [0, 4096, 8192] and live.keys() == [99_999]  # unchanged
    live.load_checkpoint(items, {}, seen.append)
    assert seen[3:] == [0, 4096, 8192] and live.size == 10_000


def test_checkpoint_preserves_fifo_order(make_item):
    table = Table.queue("q", 10)
    for k in (5, 3, 9, 1):
        table.insert_or_assign(make_item(k))
    restored = Table.from_checkpoint(*table.checkpoint())
    assert [restored.sample()[0].item.key for _ in range(4)] == [5, 3, 9, 1]


def test_restored_ratio_table_can_be_sampled_without_inserts_within_the_documented_bounds(make_item):
    spi, min_size, buffer = 2.0, 10, 6.0  # min_diff 14, max_diff 26
    table = Table("r", Uniform(seed=4), Fifo(), 1000, SampleToInsertRatio(spi, min_size, buffer))
    for k in range(50):
        table.insert_or_assign(make_item(k), timeout=5)
        while True:  # sample until the limiter blocks: the saved cursor blocks samplers
            try:
                table.sample(timeout=0)
            except errors.DeadlineExceededError:
                break
    with pytest.raises(errors.DeadlineExceededError):
        table.sample(timeout=0)
    restored = Table.from_checkpoint(*table.checkpoint())
    # Rule: cursor = min(max_diff, max(n * spi, min_diff + 1)) = min(26, 100) = 26 -> 26 - 14 = 12 samples.
    samples = 0
    while True:
        try:
            samples += len(restored.sample(timeout=0))
        except errors.DeadlineExceededError:
            break
    assert samples == 12
    assert buffer <= samples <= 2 * buffer
    restored.insert_or_assign(make_item(1000), timeout=0)  # inserts flow again and re-enable samples
    assert len(restored.sample(timeout=0)) == 1


def test_restored_queue_can_be_drained(make_item):
    table = Table.queue("q", 5)
    for k in range(4):
        table.insert_or_assign(make_item(k))
    table.sample()
    restored = Table.from_checkpoint(*table.checkpoint())
    assert [restored.sample(timeout=0)[0].item.key for _ in range(3)] == [1, 2, 3]
    with pytest.raises(errors.DeadlineExceededError):
        restored.sample(timeout=0)


def test_restore_with_fewer_than_min_size_items_behaves_like_a_fresh_table(make_item):
    table = Table("r", Uniform(seed=5), Fifo(), 100, SampleToInsertRatio(1.0, 5, 3.0))
    for k in range(3):
        table.insert_or_assign(make_item(k))
    restored = Table.from_checkpoint(*table.checkpoint())
    assert restored.rate_limiter.info()["insert_count"] == 3
    with pytest.raises(errors.DeadlineExceededError, match="fewer than min_size_to_sample 5"):
        restored.sample(timeout=0)
    for k in range(3, 5):
        restored.insert_or_assign(make_item(k), timeout=0)
    assert len(restored.sample(num_samples=100, timeout=0)) == 3  # cursor 5, min_diff 2


def test_from_checkpoint_rejects_repeated_keys(make_item):
    table = Table("t", Fifo(), Fifo(), 10, MinSize(1))
    with pytest.raises(errors.InvalidArgumentError, match="repeats item key 1"):
        Table.from_checkpoint(table.config(), [make_item(1), make_item(1)], {})


def test_base_rate_limiter_table_round_trips(make_item):
    table = Table("b", Lifo(), Lifo(), 10, RateLimiter(1.0, 1, float("-inf"), float("inf")))
    table.insert_or_assign(make_item(1))
    restored = Table.from_checkpoint(*table.checkpoint())
    assert restored.config() == table.config()
    assert restored.sample(timeout=0)[0].item.key == 1
