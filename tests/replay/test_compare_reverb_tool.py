"""tools/compare_reverb.py's sweep: its cases cover the whole grid, --quick is a subset of it, the
summary is the ratios' geometric mean and minimum; and the workload's replay side runs a dataset
case at its defaults (the Reverb side needs dm-reverb, not a dependency)."""
import importlib
import math
import os
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(name):
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)
    return importlib.import_module(f"tools.{name}")


def test_the_sweep_covers_the_grid_and_quick_is_a_part_of_it():
    tool = _load("compare_reverb")
    cases = tool.sweep_cases()
    datasets = [c for c in cases.values() if c.workload == "dataset"]
    inserts = [c for c in cases.values() if c.workload == "insert"]
    samples = [c for c in cases.values() if c.workload == "sample"]
    assert len(datasets) == 5 * 4 * 2 and len(inserts) == 3 * 4 and len(samples) == 2
    assert {(c.in_flight, c.payload, c.clients) for c in datasets} == {
        (f, p, r) for f in (1, 8, 64, 256, 1024) for p in (100, 4_000, 40_000, 400_000) for r in (1, 4)}
    assert {c.num_samples for c in samples} == {1, 100}
    assert set(tool.QUICK) <= set(cases)
    assert tool.geometric_mean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert tool.geometric_mean([4.0, 1.0]) == pytest.approx(math.sqrt(4.0))


def test_without_reverb_each_case_says_so(capsys):
    tool = _load("compare_reverb")
    assert tool.main(["--sweep", "--cases", "sample-n1-4kB", "--reverb-python", "/nonexistent/python",
                      "--seconds", "0.3", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "sample-n1-4kB" in out and "reverb not available" in out


def test_the_workloads_replay_side_reads_a_dataset_at_its_defaults():
    tool = _load("compare_reverb")
    case = tool.Case("dataset", 100, 1, in_flight=8)
    rate, cpu, error = tool.run_side(sys.executable, "replay", case, 0.5)
    assert error is None and rate > 0 and cpu is not None
