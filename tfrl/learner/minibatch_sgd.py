"""MinibatchSGD, the policy-backed `Learner` of the on-policy optimizers: `num_sgd_iter` epochs of
minibatch steps over one loaded train batch, in one tf.function call.

The train batch is split once across the devices of the policy's distribution strategy (one
shard per replica, each staying on its device for every pass: the paper's local multi-GPU
strategy); each replica shuffles its shard every epoch and
takes equally many minibatch steps, whose gradients the optimizer all-reduces. Each step is the
policy's `compute_and_apply_gradients`, so the replicas are weighted by the rule of every
learner (tfrl/policy/replica_scaling.py). With the default strategy this is plain
single-device minibatch SGD.

Recurrent policies: the train batch holds padded sequences (replay items of
tfrl/rollout/replay_output.py: step columns [sequences, max_seq_len, ...], `state_in_i` and
`seq_lens` one per sequence). Sharding, shuffling and minibatches then work on whole
sequences (`sgd_minibatch_size` counts steps, so a minibatch holds
sgd_minibatch_size // max_seq_len sequences); just before the loss, the step columns are
flattened into the [sequences * max_seq_len, ...] rows the recurrent model expects.
Trajectory fragments (IMPALA's items, `sequence_length`) go the same way: a minibatch holds
whole fragments, flattened batch-major into rows before the loss.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tree

from tfrl import errors

logger = logging.getLogger(__name__)


def _leading(nest) -> tf.Tensor:
    return tf.shape(tree.flatten(nest)[0])[0]


def _is_sequence_column(name: str) -> bool:
    return name == "seq_lens" or name.startswith("state_in_")


def _mix32(x: tf.Tensor) -> tf.Tensor:
    """MurmurHash3's 32-bit finalizer: a bijection of uint32 that spreads every input bit."""
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16)) * tf.constant(0x85EBCA6B, tf.uint32)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 13)) * tf.constant(0xC2B2AE35, tf.uint32)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def _shuffled(n, seed) -> tf.Tensor:
    """A permutation of range(n) that depends only on the two int64s of `seed`, the same in the
    graph and under XLA. (TensorFlow's stateless random ops are not: XLA's Philox gives other
    numbers for a seed computed at run time, and stateless_shuffle has no XLA kernel.) Rows are
    ordered by a hash of their index, a bijection of uint32, so no two keys tie."""
    words = tf.cast(seed, tf.uint32)  # the low 32 bits of each
    first = _mix32(words[0] + tf.constant(0x9E3779B9, tf.uint32))
    second = _mix32(tf.bitwise.bitwise_xor(words[1], first))
    rows = tf.cast(tf.range(n), tf.uint32)
    keys = _mix32(tf.bitwise.bitwise_xor(_mix32(tf.bitwise.bitwise_xor(rows, first)), second))
    return tf.argsort(tf.cast(keys, tf.int64))


def flatten_sequences(batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Step columns [B, T, ...] -> rows [B*T, ...] (batch-major, the layout of
    tfrl/models/recurrent.py); `seq_lens` and `state_in_i` stay one per sequence."""
    return {k: v if _is_sequence_column(k) else tree.map_structure(
        lambda x: tf.reshape(x, [-1, *x.shape[2:]]), v) for k, v in batch.items()}


class MinibatchSGD:
    """A `Learner` running epochs of minibatch gradient steps of `policy` (built under
    `strategy`'s scope).

    Args:
      policy: a TFPolicy (its `compute_and_apply_gradients` runs inside `strategy.run`).
      strategy: the strategy whose scope built the policy's variables (default strategy: one
        device).
      num_sgd_iter: epochs over the batch per call.
      minibatch_size: global minibatch size (split evenly over replicas).
      sequence_length: when set, the batch's step columns are [sequences, sequence_length, ...]
        (trajectory fragments) and minibatches hold whole sequences; default: a recurrent
        policy's max_seq_len, else None (rows).
      jit_compile: compile the epochs with XLA (one replica only; each new train batch size
        compiles once). A loss XLA cannot compile falls back to the plain graph, with a warning.
    """

    def __init__(self, policy, strategy: tf.distribute.Strategy, num_sgd_iter: int, minibatch_size: int,
                 sequence_length: Optional[int] = None, jit_compile: bool = False):
        self.policy = policy
        self.strategy = strategy
        self.num_sgd_iter = int(num_sgd_iter)
        self.minibatch_size = int(minibatch_size)
        self.signature = policy.loss_input_signature
        # recurrent policies learn on whole sequences of this many (padded) steps
        self.max_seq_len = (int(policy.config["model"]["max_seq_len"]) if policy.is_recurrent()
                            else sequence_length)
        self._run = None  # traced at the first call, for train batches of any size
        self._calls = 0
        # cross-replica all-reduces do not compile inside one XLA cluster
        self.jit_compile = bool(jit_compile) and strategy.num_replicas_in_sync == 1
        self._compiled_once = False

    def _replica_step(self, shard, seed, epoch, m, minibatch_size):
        """One minibatch step of one replica on its own shard. The epoch's order is a stateless
        shuffle of (seed, epoch), so it is recomputed identically at every step of the epoch."""
        n = _leading(shard)
        num_minibatches = tf.maximum(n // minibatch_size, 1)
        size = n // num_minibatches
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        order = _shuffled(n, tf.stack([seed + tf.cast(replica, tf.int64), tf.cast(epoch, tf.int64)]))
        idx = order[m * size:(m + 1) * size]
        minibatch = tree.map_structure(lambda x: tf.gather(x, idx), shard)
        if self.max_seq_len:
            minibatch = flatten_sequences(minibatch)
        stats, _ = self.policy.compute_and_apply_gradients(minibatch)
        return stats

    def _distributed_sgd(self, batch, num_iter, minibatch_size, seed):
        strategy = self.strategy
        replicas = strategy.num_replicas_in_sync
        per_replica = tf.maximum(minibatch_size // replicas, 1)
        shard_rows = _leading(batch) // replicas
        num_minibatches = tf.maximum(shard_rows // per_replica, 1)

        def shard_fn(ctx):
            start = ctx.replica_id_in_sync_group * shard_rows
            return tree.map_structure(lambda x: x[start:start + shard_rows], batch)

        shards = strategy.experimental_distribute_values_from_function(shard_fn)

        def run(j):
            # The loop stays outside strategy.run: gradient all-reduces may not sit inside
            # control flow of the replica function.
            return strategy.run(self._replica_step, args=(
                shards, seed, j // num_minibatches, j % num_minibatches, per_replica))

        stats = run(tf.constant(0))
        _, stats = tf.while_loop(lambda j, _: j < num_iter * num_minibatches,
                                 lambda j, _: (j + 1, run(j)), (tf.constant(1), stats))
        # each replica's stats are weighted by its share of the minibatch: their sum is the mean
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in stats.items()}

    def _define(self, batch_spec) -> None:
        # The leading dimension stays open: the number of rows (or sequences) of a train batch
        # varies for multi-agent and recurrent policies, and one trace serves all. Traced as
        # written, without autograph, as the policy's own functions are.
        scalar = tf.TensorSpec([], tf.int32)
        self._run = tf.function(self._distributed_sgd, input_signature=[
            batch_spec, scalar, scalar, tf.TensorSpec([], tf.int64)], autograph=False,
            jit_compile=self.jit_compile or None)

    def trace(self) -> None:
        """Traces the SGD function ahead of the first train batch (most of a second of a small
        policy's start-up; callers do this while they wait for something else). Batches of
        rows only: a batch of sequences is traced at its first call, when its padded length
        is known."""
        if self._run is not None or self.max_seq_len:
            return
        self._define(dict(self.signature))
        self._run.get_concrete_function()  # traced for the input signature just defined

    def prepare(self, columns: Dict[str, Any]) -> Dict[str, tf.Tensor]:
        """The loss's columns of a train batch, cast to the loss's dtypes.

        Raises:
          InvalidBatchError: the batch lacks a column the loss reads.
        """
        missing = sorted(set(self.signature) - set(columns))
        if missing:
            raise errors.InvalidBatchError(
                f"the train batch lacks column(s) {missing} that the policy's loss reads (it has "
                f"{sorted(columns)}); write the policy's replay_signature columns")
        return {k: tree.map_structure(lambda spec, x: tf.cast(x, spec.dtype), spec, columns[k])
                for k, spec in self.signature.items()}

    def learn_on_batch(self, columns: Dict[str, Any]) -> Dict[str, float]:
        """Runs the epochs on a train batch (dict of column tensors or arrays; padded sequences
        for a recurrent policy); returns the learner stats of the last minibatch step, means
        over the global minibatch.

        Raises:
          InvalidBatchError: the batch lacks a column the loss reads.
        """
        self._calls += 1
        minibatch = self.minibatch_size
        if self.max_seq_len:
            minibatch = max(minibatch // self.max_seq_len, 1)  # in sequences
        batch = self.prepare(columns)
        if self._run is None:
            self._define(tree.map_structure(lambda x: tf.TensorSpec([None, *x.shape[1:]], x.dtype),
                                            batch))
        args = (batch, tf.constant(self.num_sgd_iter), tf.constant(minibatch),
                tf.constant(self._calls, tf.int64))
        if self.jit_compile and not self._compiled_once:
            stats = self._first_compiled_run(args)
        else:
            stats = self._run(*args)
        self.policy.num_grad_updates += self.num_sgd_iter
        return {k: float(np.asarray(v)) for k, v in stats.items()}

    def _first_compiled_run(self, args):
        """The first call of the XLA-compiled function; when XLA cannot compile the loss (an op
        without an XLA kernel; nothing has run then), the plain graph from now on."""
        try:
            stats = self._run(*args)
        except tf.errors.InvalidArgumentError as e:
            if "XLA" not in str(e):
                raise
            logger.warning("jit_compile_learner: XLA cannot compile %s's loss, so it trains "
                           "through the plain graph (%s)", type(self.policy).__name__,
                           str(e).splitlines()[0][:300])
            self.jit_compile = False
            spec = self._run.input_signature[0]
            self._define(spec)
            stats = self._run(*args)
        self._compiled_once = True
        return stats

    learn = learn_on_batch  # the name before MinibatchSGD implemented the Learner protocol

    def get_weights(self) -> List[np.ndarray]:
        """The policy's weights (`TFPolicy.get_weights`)."""
        return self.policy.get_weights()

    def set_weights(self, weights: Sequence[np.ndarray]) -> None:
        """Assigns the policy's weights (`TFPolicy.set_weights`).

        Raises:
          CheckpointError: their number or shapes do not fit the policy's model.
        """
        self.policy.set_weights(weights)
