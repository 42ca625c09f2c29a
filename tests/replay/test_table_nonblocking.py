"""The table calls that never wait (what the replay server's event loop uses) and the bound on
how many items one sample call takes under the lock."""
from replay import rate_limiters, selectors, table as table_module
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
