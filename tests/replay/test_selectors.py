"""Selectors: sampling distributions, orders, probabilities reported, options round-trip."""
import collections
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay import errors
from replay.selectors import (Fifo, Lifo, MaxHeap, MinHeap, Prioritized, Uniform, check_priority,
                              selector_from_options)

DRAWS = 60_000


def chi_square(counts, expected_probabilities, draws):
    return sum((counts.get(k, 0) - draws * p) ** 2 / (draws * p) for k, p in expected_probabilities.items())


def assert_frequencies(selector, expected, draws=DRAWS):
    """Draws from the selector and checks a chi-square statistic against a generous bound
    (mean k-1 plus 8 standard deviations), and that each reported probability is exact."""
    counts = collections.Counter()
    for _ in range(draws):
        key, probability = selector.sample()
        counts[key] += 1
        assert probability == pytest.approx(expected[key], rel=1e-9)
    assert set(counts) <= set(expected)
    dof = len(expected) - 1
    bound = dof + 8 * math.sqrt(2 * dof)
    assert chi_square(counts, expected, draws) < bound


def prioritized_expectation(priorities, exponent):
    weights = {k: p ** exponent for k, p in priorities.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def test_prioritized_frequencies_match_priorities_to_the_exponent():
    rng = random.Random(1)
    priorities = {k: rng.uniform(0.1, 10.0) for k in range(20)}
    selector = Prioritized(priority_exponent=0.7, seed=2)
    for k, p in priorities.items():
        selector.insert(k, p)
    assert_frequencies(selector, prioritized_expectation(priorities, 0.7))


def test_prioritized_frequencies_after_updates_and_deletes():
    rng = random.Random(3)
    priorities = {k: rng.uniform(0.1, 5.0) for k in range(40)}
    selector = Prioritized(priority_exponent=1.3, seed=4)
    for k, p in priorities.items():
        selector.insert(k, p)
    for k in range(0, 40, 3):
        priorities[k] = rng.uniform(5.0, 20.0)
        selector.update(k, priorities[k])
    for k in range(1, 40, 4):
        del priorities[k]
        selector.delete(k)
    selector.insert(100, 7.5)
    priorities[100] = 7.5
    assert len(selector) == len(priorities)
    assert_frequencies(selector, prioritized_expectation(priorities, 1.3))


def test_prioritized_zero_priority_items_are_never_sampled_and_all_zero_falls_back_to_uniform():
    selector = Prioritized(priority_exponent=1.0, seed=5)
    selector.insert(1, 0.0)
    selector.insert(2, 3.0)
    assert all(selector.sample() == (2, 1.0) for _ in range(1000))
    selector.update(2, 0.0)
    selector.insert(3, 0.0)
    assert_frequencies(selector, {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}, draws=9000)


@pytest.mark.parametrize("exponent", [0.0, 0.5])
def test_prioritized_zero_priority_weighs_zero_whatever_the_exponent(exponent):
    """As Reverb's prioritized.cc: 0 ** 0 is 1, but a zero priority is never drawn while another
    item has a positive one; exponent 0 makes the positive ones equally likely."""
    selector = Prioritized(priority_exponent=exponent, seed=7)
    selector.insert(1, 0.0)
    selector.insert(2, 3.0)
    selector.insert(3, 0.0)
    selector.insert(4, 5.0)
    assert selector.probability(1) == selector.probability(3) == 0.0
    drawn = {selector.sample()[0] for _ in range(2000)}
    assert drawn == {2, 4}
    if exponent == 0.0:
        assert selector.probability(2) == selector.probability(4) == 0.5
    selector.update(2, 0.0)
    selector.update(4, 0.0)
    assert_frequencies(selector, {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}, draws=8000)


def test_prioritized_grows_past_many_doublings_and_shrinks_back():
    selector = Prioritized(priority_exponent=1.0, seed=6)
    for k in range(1000):
        selector.insert(k, float(k % 10))
    for k in range(999):
        selector.delete(k)
    assert len(selector) == 1
    assert selector.sample() == (999, 1.0)
    assert selector.probability(999) == 1.0


def test_prioritized_bulk_insert_equals_one_by_one():
    pairs = [(k, float(k % 13) + 0.5) for k in range(500)]
    bulk, single = Prioritized(0.5), Prioritized(0.5)
    bulk.insert(-1, 2.0)
    single.insert(-1, 2.0)
    bulk.insert_many(pairs)
    for k, p in pairs:
        single.insert(k, p)
    for k, _ in pairs[::37]:
        assert bulk.probability(k) == pytest.approx(single.probability(k), rel=1e-12)


def test_prioritized_rejects_bad_exponent_and_overflowing_priority():
    with pytest.raises(errors.InvalidArgumentError, match="priority_exponent"):
        Prioritized(-1.0)
    with pytest.raises(errors.InvalidArgumentError, match="priority_exponent"):
        Prioritized(float("nan"))
    with pytest.raises(errors.InvalidArgumentError, match="overflows"):
        Prioritized(3.0).validate_priority(1, 1e200)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "high", None])
def test_check_priority_rejects_bad_values(bad):
    with pytest.raises(errors.InvalidArgumentError, match="priority"):
        check_priority(7, bad)


def test_uniform_frequencies_and_swap_remove():
    selector = Uniform(seed=7)
    for k in range(30):
        selector.insert(k, float(k))
    for k in (0, 15, 29, 7):
        selector.delete(k)
    expected = {k: 1 / 26 for k in range(30) if k not in (0, 15, 29, 7)}
    assert_frequencies(selector, expected)


def drain(selector):
    order = []
    while len(selector):
        key, probability = selector.sample()
        assert probability == 1.0
        order.append(key)
        selector.delete(key)
    return order


def test_fifo_and_lifo_orders_with_deletion_from_the_middle():
    fifo, lifo = Fifo(), Lifo()
    for k in range(10):
        fifo.insert(k, 1.0)
        lifo.insert(k, 1.0)
    for k in (3, 4, 8):
        fifo.delete(k)
        lifo.delete(k)
    fifo.update(0, 100.0)  # priority does not change the order
    assert drain(fifo) == [0, 1, 2, 5, 6, 7, 9]
    assert drain(lifo) == [9, 7, 6, 5, 2, 1, 0]


def test_heaps_order_by_priority_with_ties_to_the_least_recently_updated():
    max_heap, min_heap = MaxHeap(), MinHeap()
    priorities = {1: 5.0, 2: 1.0, 3: 5.0, 4: 3.0, 5: 1.0, 6: 3.0}
    for k, p in priorities.items():
        max_heap.insert(k, p)
        min_heap.insert(k, p)
    # Re-setting the same priority makes the item the most recently updated one of its priority.
    max_heap.update(1, 5.0)
    min_heap.update(2, 1.0)
    max_heap.delete(4)
    min_heap.delete(4)
    assert drain(max_heap) == [3, 1, 6, 2, 5]
    assert drain(min_heap) == [5, 2, 6, 1, 3]


def test_heap_stays_correct_under_many_updates():
    rng = random.Random(8)
    heap = MaxHeap()
    priorities = {}
    for k in range(200):
        priorities[k] = rng.random()
        heap.insert(k, priorities[k])
    for _ in range(5000):
        k = rng.randrange(200)
        priorities[k] = rng.random()
        heap.update(k, priorities[k])
        top, _ = heap.sample()
        assert priorities[top] == max(priorities.values())
    assert len(heap._heap) <= 2 * len(priorities) + 65  # stale entries are compacted


@pytest.mark.parametrize("selector", [Fifo(), Lifo(), Uniform(), Prioritized(0.6), MaxHeap(), MinHeap()],
                         ids=lambda s: type(s).__name__)
def test_options_round_trip(selector):
    rebuilt = selector_from_options(selector.options())
    assert type(rebuilt) is type(selector)
    assert rebuilt.options() == selector.options()


@pytest.mark.parametrize("options, match", [
    ({"kind": "Random"}, "unknown selector kind"),
    ({"priority_exponent": 1.0}, "kind"),
    ({"kind": "Fifo", "priority_exponent": 1.0}, "does not take"),
    ({"kind": "Prioritized", "priority_exponent": -2}, "priority_exponent"),
    ({"kind": "Uniform", "seed": "x"}, "seed"),
])
def test_selector_from_options_rejects_bad_options(options, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        selector_from_options(options)


@pytest.mark.parametrize("cls", [Fifo, Lifo, Uniform, Prioritized, MaxHeap, MinHeap])
def test_clear_empties_the_selector(cls):
    selector = cls()
    for k in range(5):
        selector.insert(k, 1.0 + k)
    selector.clear()
    assert len(selector) == 0
    selector.insert(42, 1.0)
    assert selector.sample() == (42, 1.0)


operations = st.lists(
    st.tuples(st.sampled_from(["insert", "update", "delete", "sample"]), st.integers(0, 30),
              st.floats(0.0, 100.0, allow_nan=False)),
    min_size=1, max_size=150)


@settings(max_examples=150, deadline=None)
@given(ops=operations)
def test_selectors_agree_with_a_reference_model_under_random_operations(ops):
    """Random insert/update/delete/sample sequences: every selector agrees with a plain dict model."""
    prioritized, max_heap, min_heap, fifo, lifo, uniform = (
        Prioritized(0.5, seed=0), MaxHeap(), MinHeap(), Fifo(), Lifo(), Uniform(seed=0))
    selectors = (prioritized, max_heap, min_heap, fifo, lifo, uniform)
    model, order, touched, clock = {}, [], {}, 0
    for op, key, priority in ops:
        clock += 1
        if op == "insert" and key not in model:
            model[key], touched[key] = priority, clock
            order.append(key)
            for s in selectors:
                s.insert(key, priority)
        elif op == "update" and key in model:
            model[key], touched[key] = priority, clock
            for s in selectors:
                s.update(key, priority)
        elif op == "delete" and key in model:
            del model[key], touched[key]
            order.remove(key)
            for s in selectors:
                s.delete(key)
        elif op == "sample" and model:
            weights = {k: p ** 0.5 for k, p in model.items()}
            total = sum(weights.values())
            key_p, probability = prioritized.sample()
            expected = weights[key_p] / total if total > 0 else 1 / len(model)
            assert probability == pytest.approx(expected, rel=1e-9, abs=1e-12)
            assert total == 0 or weights[key_p] > 0
            assert max_heap.sample()[0] == min(model, key=lambda k: (-model[k], touched[k]))
            assert min_heap.sample()[0] == min(model, key=lambda k: (model[k], touched[k]))
            assert fifo.sample()[0] == order[0] and lifo.sample()[0] == order[-1]
            key_u, probability_u = uniform.sample()
            assert key_u in model and probability_u == pytest.approx(1 / len(model))
        assert all(len(s) == len(model) for s in selectors)
