"""Observation filters: exact parallel merging of running statistics and worker synchronisation."""
import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfrl import errors
from tfrl.rollout.filters import MeanStdFilter, NoFilter, RunningStat, make_filter

rows = st.lists(st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=3), min_size=0, max_size=40)


@settings(max_examples=60, deadline=None)
@given(rows, rows, rows)
def test_merging_partial_statistics_equals_statistics_of_all_rows(a, b, c):
    parts = [np.asarray(x, np.float64).reshape(-1, 3) for x in (a, b, c)]
    merged = RunningStat((3,))
    for part in parts:
        s = RunningStat((3,))
        s.push_batch(part)
        merged.merge(s)
    everything = np.concatenate(parts)
    assert merged.count == len(everything)
    if len(everything):
        np.testing.assert_allclose(merged.mean, everything.mean(axis=0), rtol=1e-9, atol=1e-6)
    if len(everything) > 1:
        np.testing.assert_allclose(merged.var, everything.var(axis=0, ddof=1), rtol=1e-7, atol=1e-5)


def test_driver_merge_and_sync_counts_each_worker_update_once():
    rng = np.random.default_rng(0)
    driver = MeanStdFilter((2,))
    workers = [MeanStdFilter((2,)) for _ in range(2)]
    seen = []
    for _round in range(3):
        for w in workers:
            data = rng.normal(5.0, 2.0, size=(50, 2))
            seen.append(data)
            w(data)
        for w in workers:  # the driver flushes each worker's updates into its own filter
            driver.apply_changes(w.copy())
            w.clear_buffer()
        for w in workers:
            w.sync(driver)
    everything = np.concatenate(seen)
    assert driver.running_stat.count == len(everything)
    np.testing.assert_allclose(driver.running_stat.mean, everything.mean(axis=0), rtol=1e-9)
    for w in workers:
        assert w.running_stat.count == len(everything)
    out = workers[0](np.array([[5.0, 5.0]]), update=False)
    assert np.abs(out).max() < 0.2  # the shared statistics centre the data at ~5


def test_make_filter_validates_name_and_space():
    assert isinstance(make_filter("NoFilter", gym.spaces.Discrete(3)), NoFilter)
    with pytest.raises(errors.UnsupportedSpaceError, match="Box"):
        make_filter("MeanStdFilter", gym.spaces.Discrete(3))
    with pytest.raises(errors.InvalidConfigError, match="MeanStdFilter"):
        make_filter("Whitening", gym.spaces.Box(-1, 1, (2,)))
