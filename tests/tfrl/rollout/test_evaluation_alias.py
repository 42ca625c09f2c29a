"""The old package name `tfrl.evaluation` stays importable for a release, as an alias of `tfrl.rollout`."""
import importlib
import sys

import pytest


def test_old_package_name_gives_the_same_modules_with_a_deprecation_warning():
    sys.modules.pop("tfrl.evaluation", None)
    with pytest.warns(DeprecationWarning, match="tfrl.rollout"):
        old = importlib.import_module("tfrl.evaluation")
    import tfrl.rollout
    import tfrl.rollout.rollout_worker
    assert old.RolloutWorker is tfrl.rollout.RolloutWorker
    assert importlib.import_module("tfrl.evaluation.rollout_worker") is tfrl.rollout.rollout_worker
    from tfrl.evaluation.worker_set import WorkerSet
    assert WorkerSet is tfrl.rollout.WorkerSet
