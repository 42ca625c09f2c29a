"""The one replica-scaling rule of every gradient step: weight each replica by its share of the batch.

Every gradient step in tfrl (a policy's `learn_on_batch`, `MinibatchSGD`, `MirroredLearner`)
goes through `scaled_gradients`. Each replica computes its loss as the mean over its own rows;
the optimizer's `apply_gradients` in a replica context sums the gradients of all replicas. So
each replica's loss is weighted by its share of the global batch, local rows / global rows,
and the applied update is the gradient of the mean loss over the global batch, also when the
replicas got unequal numbers of rows (the last batch of a dataset, a batch that does not divide
evenly). Statistics are weighted the same way (`weight_by_share`), so their SUM over replicas is
the global-batch mean; a value every replica agrees on (a learning rate) comes out unchanged.

On one device (the default strategy, or a strategy with one replica) the share is exactly 1 and
no cross-replica communication happens.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import tensorflow as tf
import tree

from tfrl import errors


def leading_dim(nest: Any) -> tf.Tensor:
    """The number of rows (the leading dimension of the first leaf) of a batch, as int32.

    Raises:
      InvalidBatchError: the batch holds no tensor at all.
    """
    leaves = tree.flatten(nest)
    if not leaves:
        raise errors.InvalidBatchError(
            "a gradient step got an empty batch structure; pass a batch with at least one column")
    return tf.shape(leaves[0], out_type=tf.int32)[0]


def replica_share(local_rows: tf.Tensor) -> Tuple[Union[float, tf.Tensor], tf.Tensor]:
    """(share, global_rows) of this replica: share = local_rows / rows summed over replicas.

    Call it in a replica context (inside `strategy.run`, or anywhere outside a strategy's
    cross-replica context). With one replica in sync the share is the Python float 1.0 and no
    all-reduce is built. An empty global batch gives share 0 rather than a division by zero.

    Raises:
      NotSupportedError: called in a cross-replica context (inside `strategy.scope()` but
        outside `strategy.run`), where there is no single replica to weight.
    """
    context = tf.distribute.get_replica_context()
    if context is None:
        raise errors.NotSupportedError(
            "a gradient step ran in a cross-replica context; call it inside strategy.run (or "
            "outside strategy.scope()), where each replica has its own batch")
    local_rows = tf.cast(local_rows, tf.int32)
    if context.num_replicas_in_sync == 1:
        return 1.0, local_rows  # a Python 1.0: the one-device step builds no scaling ops
    global_rows = context.all_reduce(tf.distribute.ReduceOp.SUM, local_rows)
    share = tf.cast(local_rows, tf.float32) / tf.cast(tf.maximum(global_rows, 1), tf.float32)
    return share, global_rows


def weight_by_share(stats: Optional[Dict[str, Any]], share: Union[float, tf.Tensor]) -> Dict[str, Any]:
    """Each scalar statistic times the replica's share (as float32): reduce them with SUM.
    With the one-replica share 1.0 the statistics come back as they are."""
    if isinstance(share, float) and share == 1.0:
        return dict(stats or {})
    return {name: tf.cast(value, tf.float32) * share for name, value in (stats or {}).items()}


@dataclasses.dataclass
class ScaledGradients:
    """What `scaled_gradients` computed on one replica's batch.

    `grads_and_vars` are the gradients of `scaled_loss` = loss * share (pairs whose gradient is
    None are dropped); `loss`, `stats` and `per_sample` are the loss function's own outputs on
    this replica's rows (unweighted); `share` and `global_rows` come from `replica_share`.
    """

    grads_and_vars: List[tuple]
    scaled_loss: tf.Tensor
    loss: tf.Tensor
    stats: Dict[str, Any]
    per_sample: Dict[str, Any]
    share: Union[float, tf.Tensor]
    global_rows: tf.Tensor


def scaled_gradients(trainee, batch: Any, loss_fn: Optional[Callable[[Any], tuple]] = None
                     ) -> ScaledGradients:
    """Gradients of this replica's mean loss weighted by its share of the global batch.

    `trainee` is a `tfrl.learner.learner.Trainee` (its `gradients(optimizer, tape, loss)` may
    clip: clipping then acts on each replica's weighted gradient); `loss_fn(batch) -> (loss,
    stats, per_sample)` defaults to `trainee.loss_and_stats`. The caller applies the gradients
    (`trainee.apply_gradients_op`), so it can read them first (for example their norm).

    Raises:
      InvalidBatchError: the batch holds no tensor.
      NotSupportedError: called in a cross-replica context (see `replica_share`).
    """
    share, global_rows = replica_share(leading_dim(batch))
    loss_fn = loss_fn or trainee.loss_and_stats
    with tf.GradientTape() as tape:
        loss, stats, per_sample = loss_fn(batch)
        scaled_loss = loss if isinstance(share, float) else loss * tf.cast(share, loss.dtype)
    grads_and_vars = [(g, v) for g, v in trainee.gradients(trainee.optimizer, tape, scaled_loss)
                      if g is not None]
    return ScaledGradients(grads_and_vars, scaled_loss, loss, dict(stats or {}),
                           dict(per_sample or {}), share, global_rows)
