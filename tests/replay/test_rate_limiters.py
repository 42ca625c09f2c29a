"""Rate limiters: Reverb's predicates and validation, and blocking across threads through a Table."""
import threading
import time

import pytest

from replay import errors
from replay.rate_limiters import (MinSize, Queue, RateLimiter, SampleToInsertRatio, Stack,
                                  rate_limiter_from_config)
from replay.selectors import Fifo, Uniform
from replay.table import Table

pytestmark = pytest.mark.timeout(60)


def test_min_size_blocks_samples_until_min_size_and_never_blocks_inserts():
    limiter = MinSize(3)
    assert limiter.can_insert(size=10**6)
    assert not limiter.can_sample(size=2)
    assert limiter.can_sample(size=3)


def test_sample_to_insert_ratio_bounds_and_predicates_follow_reverb():
    limiter = SampleToInsertRatio(samples_per_insert=2.0, min_size_to_sample=5, error_buffer=4.0)
    assert (limiter.min_diff, limiter.max_diff) == (6.0, 14.0)
    # Inserts are free while the table holds at most min_size_to_sample after them, whatever
    # the cursor (Reverb's CanInsert): the insert that reaches min size too.
    limiter.insert_count, limiter.sample_count = 3, -100
    assert limiter.can_insert(size=3, num_inserts=1)
    assert limiter.can_insert(size=4, num_inserts=1)
    assert not limiter.can_insert(size=4, num_inserts=2)
    # From min size on, the cursor after the insert must stay <= max_diff.
    limiter.insert_count, limiter.sample_count = 7, 0  # cursor 14
    assert not limiter.can_insert(size=7)
    limiter.sample_count = 2  # cursor 12: one more insert reaches 14
    assert limiter.can_insert(size=7)
    limiter.sample_count = 1
    assert not limiter.can_insert(size=7)
    # Samples need size >= min size and the cursor after the sample >= min_diff.
    limiter.insert_count, limiter.sample_count = 4, 0
    assert not limiter.can_sample(size=4)
    limiter.insert_count, limiter.sample_count = 5, 3  # cursor 7
    assert limiter.can_sample(size=5, num_samples=1)
    assert not limiter.can_sample(size=5, num_samples=2)


def test_sample_to_insert_ratio_accepts_explicit_bounds():
    limiter = SampleToInsertRatio(0.5, 1, (-3.0, 3.0))
    assert (limiter.min_diff, limiter.max_diff) == (-3.0, 3.0)


def test_queue_and_stack_bounds():
    for cls in (Queue, Stack):
        limiter = cls(4)
        assert (limiter.samples_per_insert, limiter.min_size_to_sample, limiter.min_diff, limiter.max_diff) == (
            1.0, 1, 0.0, 4.0)


@pytest.mark.parametrize("build, match", [
    (lambda: MinSize(0), "min_size_to_sample"),
    (lambda: MinSize(-3), "min_size_to_sample"),
    (lambda: MinSize(1.5), "min_size_to_sample"),
    (lambda: Queue(0), "size"),
    (lambda: Stack(-1), "size"),
    (lambda: SampleToInsertRatio(0.0, 1, 10.0), "samples_per_insert"),
    (lambda: SampleToInsertRatio(-1.0, 1, 10.0), "samples_per_insert"),
    (lambda: SampleToInsertRatio(float("nan"), 1, 10.0), "samples_per_insert"),
    (lambda: SampleToInsertRatio(1.0, 0, 10.0), "min_size_to_sample"),
    (lambda: SampleToInsertRatio(4.0, 10, 3.0), "at least 2 \\* max\\(1, samples_per_insert\\) = 8"),
    (lambda: SampleToInsertRatio(1.0, 10, (5.0, 6.0)), "must be at least"),
    (lambda: SampleToInsertRatio(1.0, 10, (1.0, 2.0, 3.0)), "pair"),
    (lambda: RateLimiter(1.0, 1, 5.0, 1.0), "min_diff"),
    (lambda: RateLimiter(1.0, 1, float("nan"), 1.0), "NaN"),
])
def test_invalid_arguments_raise_invalid_argument_error(build, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        build()


@pytest.mark.parametrize("limiter", [
    MinSize(7), SampleToInsertRatio(3.0, 2, 10.0), SampleToInsertRatio(0.5, 1, (-2.0, 5.0)), Queue(9), Stack(3),
    RateLimiter(2.0, 4, -1.0, 30.0), RateLimiter(1.0, 1, float("-inf"), float("inf"))],
    ids=repr)
def test_config_round_trip(limiter):
    import json
    rebuilt = rate_limiter_from_config(json.loads(json.dumps(limiter.config())))
    assert type(rebuilt) is type(limiter)
    for field in ("samples_per_insert", "min_size_to_sample", "min_diff", "max_diff"):
        assert getattr(rebuilt, field) == getattr(limiter, field)


@pytest.mark.parametrize("config, match", [
    ({"kind": "Token"}, "unknown rate limiter"),
    ({"kind": "MinSize"}, "bad arguments"),
    ({"kind": "Queue", "size": 0}, "size"),
    ("MinSize", "dict"),
])
def test_rate_limiter_from_config_rejects_bad_configs(config, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        rate_limiter_from_config(config)


def test_a_rate_limiter_serves_one_table(make_item):
    limiter = MinSize(1)
    Table("first", Fifo(), Fifo(), 10, limiter)
    with pytest.raises(errors.InvalidArgumentError, match="already belongs to table 'first'"):
        Table("second", Fifo(), Fifo(), 10, limiter)


# -- blocking across threads -------------------------------------------------------------------


def run_in_thread(fn):
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:  # surfaced to the test through `result`
            result["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def wait_until(predicate, limit=10.0):
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_blocked_sampler_is_woken_by_an_insert(make_item):
    table = Table("t", Fifo(), Fifo(), 10, MinSize(2))
    table.insert_or_assign(make_item(1))
    thread, result = run_in_thread(lambda: table.sample(timeout=30))
    wait_until(lambda: table._sample_waiters == 1)
    assert thread.is_alive()
    table.insert_or_assign(make_item(2))
    thread.join(10)
    assert not thread.is_alive() and "error" not in result
    assert result["value"][0].item.key == 1


def test_blocked_inserter_is_woken_by_a_sample(make_item):
    table = Table.queue("q", max_size=2)
    table.insert_or_assign(make_item(1))
    table.insert_or_assign(make_item(2))
    thread, result = run_in_thread(lambda: table.insert_or_assign(make_item(3), timeout=30))
    wait_until(lambda: table._insert_waiters == 1)
    assert thread.is_alive() and len(table) == 2
    assert [s.item.key for s in table.sample()] == [1]
    thread.join(10)
    assert not thread.is_alive() and "error" not in result
    assert table.keys() == [2, 3]


def test_blocked_inserter_is_woken_by_a_delete_below_min_size(make_item):
    # Inserts are free while size + 1 < min_size_to_sample: a delete can unblock one.
    table = Table("t", Fifo(), Fifo(), 100, SampleToInsertRatio(1.0, 3, (-1.0, 3.0)))
    for k in range(3):  # cursor 3 = max_diff: the next insert blocks
        table.insert_or_assign(make_item(k), timeout=5)
    thread, result = run_in_thread(lambda: table.insert_or_assign(make_item(9), timeout=30))
    wait_until(lambda: table._insert_waiters == 1)
    table.mutate_priorities(deletes=[0, 1])
    thread.join(10)
    assert "error" not in result and 9 in table.keys()


def test_timeouts_say_which_condition_blocks_with_the_numbers(make_item):
    table = Table("t", Uniform(seed=1), Fifo(), 10, SampleToInsertRatio(1.0, 2, 2.0))
    with pytest.raises(errors.DeadlineExceededError, match=r"holds 0 items, fewer than min_size_to_sample 2"):
        table.sample(timeout=0.05)
    for k in range(4):  # cursor 4 = max_diff
        table.insert_or_assign(make_item(k))
    with pytest.raises(errors.DeadlineExceededError, match=r"cursor .* to 5, above max_diff 4 .*inserts 4, samples 0"):
        table.insert_or_assign(make_item(4), timeout=0.05)
    assert len(table) == 4 and table.info().num_inserts == 4  # nothing changed
    for _ in range(4):  # cursor 0 = min_diff
        table.sample(timeout=0)
    with pytest.raises(errors.DeadlineExceededError, match=r"cursor .* to -1, below min_diff 0 .*inserts 4, samples 4"):
        table.sample(timeout=0)


def test_sample_to_insert_ratio_stays_within_its_buffer_under_four_threads(make_item, shared_chunk):
    spi, min_size, buffer = 2.0, 10, 6.0
    limiter = SampleToInsertRatio(spi, min_size, buffer)
    table = Table("ratio", Uniform(seed=2), Fifo(), 10_000, limiter)
    observed, violations = [], []
    inserters_done = threading.Event()
    errors_seen = []

    def observe():
        info = table.info().rate_limiter_info
        cursor = info["insert_count"] * spi - info["sample_count"]
        observed.append(cursor)
        upper_ok = cursor <= limiter.max_diff
        lower_ok = info["sample_count"] == 0 or cursor >= limiter.min_diff
        if not (upper_ok and lower_ok):
            violations.append(info)

    def inserter(first_key):
        try:
            for k in range(first_key, first_key + 150):
                table.insert_or_assign(make_item(k, chunk=shared_chunk), timeout=30)
                observe()
        except Exception as e:
            errors_seen.append(e)

    def sampler():
        try:
            while True:
                try:
                    table.sample(num_samples=3, timeout=0.05)
                except errors.DeadlineExceededError:
                    if inserters_done.is_set():
                        return
                    continue
                observe()
        except Exception as e:
            errors_seen.append(e)

    inserters = [threading.Thread(target=inserter, args=(i * 1000,)) for i in range(2)]
    samplers = [threading.Thread(target=sampler) for _ in range(2)]
    for t in inserters + samplers:
        t.start()
    for t in inserters:
        t.join(50)
    inserters_done.set()
    for t in samplers:
        t.join(50)
    assert not errors_seen
    assert not violations
    info = table.info().rate_limiter_info
    assert info["insert_count"] == 300
    # Samplers drained until the cursor reached its lower bound: samples/inserts is spi within the buffer.
    final_cursor = info["insert_count"] * spi - info["sample_count"]
    assert limiter.min_diff <= final_cursor < limiter.min_diff + 1
    assert abs(info["sample_count"] - spi * info["insert_count"]) <= spi * min_size + buffer
    assert len(observed) > 300


def test_close_wakes_blocked_callers_with_cancelled_error(make_item):
    table = Table.queue("q", max_size=1)
    table.insert_or_assign(make_item(1))
    inserter, insert_result = run_in_thread(lambda: table.insert_or_assign(make_item(2)))
    empty = Table("e", Fifo(), Fifo(), 5, MinSize(1))
    sampler, sample_result = run_in_thread(lambda: empty.sample())
    wait_until(lambda: table._insert_waiters == 1 and empty._sample_waiters == 1)
    table.close()
    empty.close()
    inserter.join(10)
    sampler.join(10)
    assert isinstance(insert_result.get("error"), errors.CancelledError)
    assert isinstance(sample_result.get("error"), errors.CancelledError)
    with pytest.raises(errors.CancelledError):
        table.sample(timeout=0)
    with pytest.raises(errors.CancelledError):
        empty.insert_or_assign(make_item(5))
    assert table.keys() == [1]
