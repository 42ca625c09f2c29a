"""The old module `tfrl.optimizers.minibatch_sgd` stays importable for a release, as an alias."""
import importlib
import sys

import pytest


def test_old_module_gives_the_same_classes_with_a_deprecation_warning():
    sys.modules.pop("tfrl.optimizers.minibatch_sgd", None)
    with pytest.warns(DeprecationWarning, match="tfrl.learner.minibatch_sgd"):
        old = importlib.import_module("tfrl.optimizers.minibatch_sgd")
    from tfrl.learner.minibatch_sgd import MinibatchSGD, flatten_sequences
    from tfrl.learner.row_reader import RowReader
    assert old.MinibatchSGD is MinibatchSGD
    assert old.RowReader is RowReader
    assert old.flatten_sequences is flatten_sequences
