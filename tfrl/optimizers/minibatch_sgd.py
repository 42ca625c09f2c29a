"""Deprecated alias: MinibatchSGD moved to `tfrl.learner.minibatch_sgd` and RowReader to
`tfrl.learner.row_reader` (this alias goes in the next release)."""
import warnings

from tfrl.learner.minibatch_sgd import MinibatchSGD, flatten_sequences  # noqa: F401
from tfrl.learner.row_reader import RowReader  # noqa: F401

warnings.warn("tfrl.optimizers.minibatch_sgd moved to tfrl.learner.minibatch_sgd (MinibatchSGD) and "
              "tfrl.learner.row_reader (RowReader); import from there instead",
              DeprecationWarning, stacklevel=2)
