"""The learner contract: what a policy optimizer drives, and what a learner trains.

Two protocols meet here. A `Learner` is what a policy optimizer calls to take gradient steps:
`learn_on_batch` on one loaded train batch, and `get_weights`/`set_weights` to move the weights
it trains. It is implemented by a `TFPolicy` itself (one gradient step on one device), by
`MinibatchSGD` (epochs of minibatch steps of a policy, on one device or a MirroredStrategy) and
by `MirroredLearner` (steps on every local device, also fed by a distributed dataset through
`DatasetLearner.train`). A `Trainee` is what a learner trains: the variables, the optimizer,
the loss and the two halves of a gradient step; a `TFPolicy` is one, and `as_trainee` makes one
of any object with `trainable_variables`, `optimizer` and `loss_and_stats`.

Every gradient step of every learner computes its gradients with
`tfrl.policy.replica_scaling.scaled_gradients` (one replica-scaling rule).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Sequence, runtime_checkable

import numpy as np
import tensorflow as tf

from tfrl import errors


@runtime_checkable
class Learner(Protocol):
    """Takes gradient steps on the weights it owns."""

    def learn_on_batch(self, batch: Any) -> Dict[str, Any]:
        """Learns on one train batch (a SampleBatch or a dict of column arrays/tensors): one
        gradient step, or for `MinibatchSGD` its epochs of minibatch steps.

        Returns the learner statistics as floats, each the mean over the global batch (a
        learner may add per-sample arrays, such as `td_error`, under their own names).

        Raises:
          InvalidBatchError: the batch lacks a column the loss reads, or a column's shape does
            not fit the loss's input signature, or it holds no column at all.
        """
        ...

    def get_weights(self) -> List[np.ndarray]:
        """The trained weights as numpy arrays, in a fixed order `set_weights` accepts."""
        ...

    def set_weights(self, weights: Sequence[np.ndarray]) -> None:
        """Assigns weights from `get_weights` (of this learner or one built the same way).

        Raises:
          CheckpointError: their number or shapes do not fit.
        """
        ...


@runtime_checkable
class DatasetLearner(Learner, Protocol):
    """A learner fed by a (distributed) tf.data pipeline, several steps per call."""

    def train(self, iterator: Any, num_steps: Optional[int] = None) -> List[Any]:
        """Runs up to `num_steps` gradient steps on batches from `iterator`; returns one
        `StepOutput` per step taken (fewer, or none, when the dataset ended).

        Raises:
          InvalidConfigError: `iterator` is a dataset rather than an iterator over one, or
            `num_steps` < 1.
        """
        ...


@runtime_checkable
class Trainee(Protocol):
    """What a learner trains. A `TFPolicy` is a Trainee (`gradients` applies its grad_clip)."""

    optimizer: Any

    @property
    def trainable_variables(self) -> List[tf.Variable]:
        ...

    def loss_and_stats(self, batch: Any) -> tuple:
        """(loss, stats, per_sample): the mean loss over the batch, scalar statistics (means
        over the batch) and per-sample tensors with the batch as leading dimension. Traceable."""
        ...

    def gradients(self, optimizer: Any, tape: tf.GradientTape, loss: tf.Tensor) -> List[tuple]:
        """(gradient, variable) pairs of `loss` recorded on `tape`."""
        ...

    def apply_gradients_op(self, optimizer: Any, grads_and_vars: List[tuple]) -> None:
        """Applies (gradient, variable) pairs (inside a replica context under a strategy)."""
        ...


class KerasTrainee:
    """A `Trainee` around an object with only `trainable_variables`, `optimizer` and
    `loss_and_stats`: plain tape gradients over `trainable_variables`, applied by the optimizer."""

    def __init__(self, model: Any):
        self.model = model

    @property
    def optimizer(self):
        return self.model.optimizer

    @property
    def trainable_variables(self) -> List[tf.Variable]:
        return list(self.model.trainable_variables)

    def loss_and_stats(self, batch):
        return self.model.loss_and_stats(batch)

    def gradients(self, optimizer, tape, loss):
        variables = self.trainable_variables
        return list(zip(tape.gradient(loss, variables), variables))

    def apply_gradients_op(self, optimizer, grads_and_vars) -> None:
        optimizer.apply_gradients(grads_and_vars)


def as_trainee(obj: Any, require_loss: bool = True) -> Trainee:
    """`obj` itself when it is a `Trainee` (a tfrl policy), else a `KerasTrainee` around it.

    `require_loss=False` accepts an object without `loss_and_stats` (the learner then has its
    own loss function).

    Raises:
      InvalidConfigError: `obj` lacks `trainable_variables` or `optimizer`, or (with
        `require_loss`) `loss_and_stats`.
    """
    for attribute in ("trainable_variables", "optimizer"):
        if not hasattr(obj, attribute):
            raise errors.InvalidConfigError(
                f"{type(obj).__name__} has no {attribute!r}; a learner trains an object with "
                "trainable_variables, optimizer and loss_and_stats (a tfrl policy has all three)")
    if require_loss and not hasattr(obj, "loss_and_stats"):
        raise errors.InvalidConfigError(
            f"{type(obj).__name__} has no loss_and_stats and the learner got no loss function; "
            "give it loss_and_stats(batch) -> (loss, stats, per_sample) or pass "
            "loss_fn=lambda batch: (loss, stats, per_sample)")
    if isinstance(obj, Trainee):
        return obj
    return KerasTrainee(obj)
