"""The table calls that never wait (what the replay server's event loop uses) and the bound on
how many items one sample call takes under the lock."""
import pytest

from replay import errors, rate_limiters, selectors, table as table_module
from replay.items import Item
from replay.table import Table
from tests.replay.conftest import build_item


def test_try_insert_many_inserts_what_the_rate_limiter_allows_and_returns_the_count(shared_chunk):
    table = Table.queue("queue", 2)
    items = table.validate_items([build_item(k, chunk=shared_chunk) for k in (1, 2, 3)])
    assert table.try_insert_many(items) == 2  # the queue holds two
    assert table.keys() == [1, 2]
    assert table.try_insert_many(items[2:]) == 0
    assert [s.item.key for s in table.try_sample(1)] == [1]
    assert table.try_insert_many(items[2:]) == 1
    assert table.keys() == [2, 3]


@pytest.mark.parametrize("sampler", [lambda: selectors.Uniform(seed=3), lambda: selectors.Prioritized(0.7, seed=3)])
@pytest.mark.parametrize("remover", [selectors.Fifo, selectors.MinHeap, selectors.Lifo])
def test_try_insert_many_changes_the_table_as_inserting_one_by_one(sampler, remover, shared_chunk):
    """A batch the rate limiter allows whole takes the batched paths; they must leave the table
    exactly as inserting its items one at a time does: the same items and priorities (keys
    already present are updated), evictions, counters, and the same samples from the same seed."""
    def build():
        return Table("t", sampler(), remover(), 8, rate_limiters.MinSize(1))

    batched, one_by_one = build(), build()
    batches = [[(k, float(k % 5)) for k in range(6)],  # fits
               [(2, 9.0), (7, 0.5), (3, 4.0)],  # updates two present keys
               [(k, 1.5) for k in range(10, 14)],  # one fits, three evict
               [(k, float(k % 3) + 0.5) for k in range(20, 33)],  # more than the table holds
               [(k, 2.5) for k in range(40, 45)]]  # every one evicts
    for batch in batches:
        items = batched.validate_items([build_item(k, p, chunk=shared_chunk) for k, p in batch])
        assert batched.try_insert_many(items) == len(batch)
        for k, p in batch:
            one_by_one.insert_or_assign(build_item(k, p, chunk=shared_chunk))
    a, b = batched.info(), one_by_one.info()
    assert (a.size, a.num_inserts, a.num_evictions, a.num_updates, a.rate_limiter_info) == (
        b.size, b.num_inserts, b.num_evictions, b.num_updates, b.rate_limiter_info)
    assert a.num_evictions > 0 and a.num_updates == 2
    assert sorted(batched.keys()) == sorted(one_by_one.keys())
    assert {k: batched.get(k).priority for k in batched.keys()} == {
        k: one_by_one.get(k).priority for k in one_by_one.keys()}
    assert [s.item.key for s in batched.try_sample(20)] == [s.item.key for s in one_by_one.try_sample(20)]


@pytest.mark.parametrize("sampler", [selectors.Uniform, lambda: selectors.Prioritized(0.8)])
@pytest.mark.parametrize("bad, match", [(float("nan"), "item 3: priority"), (-1.0, "item 3: priority"),
                                        (float("inf"), "item 3: priority")])
def test_validate_items_names_the_bad_item_of_a_batch(sampler, bad, match, shared_chunk):
    table = Table("t", sampler(), selectors.Fifo(), 10, rate_limiters.MinSize(1))
    items = [build_item(k, 1.0, chunk=shared_chunk) for k in (1, 2, 3, 4)]
    items[2].priority = bad
    with pytest.raises(errors.InvalidArgumentError, match=match):
        table.validate_items(items)
    key = shared_chunk.key  # an 8-step chunk of two columns; steps 7-8 run past its end
    out_of_range = Item(5, 1.0, ((False, ((key, 7, 2, 0),)), (False, ((key, 7, 2, 1),))), {key: shared_chunk})
    with pytest.raises(errors.InvalidArgumentError, match="item 5"):
        table.validate_items(items[:2] + [out_of_range])
    assert table.info().size == 0
    assert table.validate_items(items[:2]) == items[:2]


def test_try_sample_returns_nothing_instead_of_waiting(shared_chunk):
    table = Table("t", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(2))
    table.insert_or_assign(build_item(1, chunk=shared_chunk))
    assert table.try_sample(5) == []
    assert "min_size_to_sample" in table.sample_blocker()
    table.insert_or_assign(build_item(2, chunk=shared_chunk))
    assert len(table.try_sample(5)) == 5


def test_change_listeners_hear_when_inserts_or_samples_may_proceed(shared_chunk):
    table = Table.queue("queue", 1)
    heard = []
    table.add_change_listener(heard.append)
    table.insert_or_assign(build_item(1, chunk=shared_chunk))
    assert heard == ["sample"]
    table.try_sample(1)
    assert heard == ["sample", "insert"]
    table.close()
    assert heard[-2:] == ["insert", "sample"]
    table.remove_change_listener(heard.append)
    count = len(heard)
    table.remove_change_listener(heard.append)  # unknown listeners are ignored
    assert len(heard) == count


def test_one_sample_call_takes_a_bounded_number_of_items(shared_chunk):
    table = Table("t", selectors.Uniform(seed=0), selectors.Fifo(), 10, rate_limiters.MinSize(1))
    table.insert_or_assign(build_item(1, chunk=shared_chunk))
    assert len(table.sample(2**31 - 1)) == table_module.MAX_SAMPLES_PER_CALL
    assert len(table.try_sample(2**31 - 1)) == table_module.MAX_SAMPLES_PER_CALL
    assert table.info().num_samples == 2 * table_module.MAX_SAMPLES_PER_CALL
