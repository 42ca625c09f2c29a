"""examples/custom_policy.py: the build_tf_policy PG example improves CartPole returns."""
import importlib.util
import inspect
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "custom_policy.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("custom_policy_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(240)
def test_pg_example_improves_mean_return():
    example = _load_example()
    definition = inspect.getsource(example.pg_loss).splitlines()
    source = EXAMPLE.read_text().splitlines()
    start = next(i for i, line in enumerate(source) if line.startswith("PGPolicy = "))
    end = next(i for i in range(start, len(source)) if source[i] == ")")
    assert len(definition) + (end - start + 1) < 40
    history = example.main(num_iters=16, seed=0, verbose=False)
    early, late = np.mean(history[:3]), np.mean(history[-3:])
    assert late > 1.5 * early, history
