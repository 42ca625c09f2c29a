"""The MirroredStrategy learner: K synchronous gradient steps per call on every local device.

This is the last stage of the data path: `replay.ReplayDataset` (or any
tf.data pipeline) feeds a distributed dataset; each call of `MirroredLearner.train` runs one
`tf.function` that takes K steps, each step running the loss on every replica's own batch
(`strategy.run`) and applying the all-reduced gradients. After the call, a hook receives every
step's per-sample `SampleInfo` and per-sample outputs (for example TD errors, which become
priority updates via `Client.mutate_priorities`), and the reduced statistics.
See docs/architecture.md, "Data path".

What the learner trains is anything built inside `strategy.scope()` by a factory that exposes
`trainable_variables`, `optimizer` and `loss_and_stats(batch) -> (loss, stats, per_sample)`:
a tfrl policy, or a small object around a Keras model. `loss` is the mean over the replica's
batch; the learner weights each replica by its share of the global batch, so losses,
statistics and gradients are means over the global batch, never sums over replicas.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tree

from tfrl import errors
from tfrl.learner.learner import as_trainee
from tfrl.policy.replica_scaling import scaled_gradients, weight_by_share
from tfrl.utils.tf_data import without_autotuning

logger = logging.getLogger(__name__)

# Signature of the per-replica loss: batch data -> (scalar loss, {name: scalar}, {name: [B, ...]}).
LossFn = Callable[[Any], tuple]

# Iterators whose traced training function a learner keeps (a lane, an evaluation stream, a test).
_BOUND_ITERATORS_KEPT = 4


@dataclasses.dataclass
class StepOutput:
    """What one training step produced, in global-batch order (replica 0's rows first).

    `info` is the batch's `SampleInfo` (numpy arrays, one row per sample) when the dataset
    yields `ReplaySample`s, else None; `per_sample` holds the loss's per-sample outputs;
    `stats` holds the statistics averaged over the global batch; `step` counts steps taken
    by this learner, starting at 1.
    """

    step: int
    batch_size: int
    stats: Dict[str, float]
    per_sample: Dict[str, np.ndarray]
    info: Any = None


_STRATEGIES: Dict[tuple, tf.distribute.MirroredStrategy] = {}


def mirrored_strategy(devices: Optional[Sequence[str]] = None) -> tf.distribute.MirroredStrategy:
    """The process's MirroredStrategy over `devices` (default: every local GPU, or every
    logical CPU device when there is no GPU; tests split the CPU into two logical devices).

    One strategy object per device set is reused: each new MirroredStrategy numbers its
    collective all-reduces from the same start, so two strategies over the same devices in one
    process can pair up each other's all-reduces (TensorFlow then fails with "Shape mismatch
    in the collective instance"). Learners sharing the strategy get distinct numbers.
    """
    if devices is None:
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    key = tuple(devices)
    strategy = _STRATEGIES.get(key)
    if strategy is None:
        cross_device_ops = None
        if all("GPU" not in d.upper() for d in devices):
            # CPU replicas reduce through one device: no collective ops, whose instance keys
            # collide between strategies (also ones user code builds) in the same process.
            cross_device_ops = tf.distribute.ReductionToOneDevice()
        strategy = _STRATEGIES[key] = tf.distribute.MirroredStrategy(
            list(devices), cross_device_ops=cross_device_ops)
    return strategy


def default_strategy() -> tf.distribute.MirroredStrategy:
    """`mirrored_strategy()` over every local GPU, else every logical CPU device."""
    return mirrored_strategy()


def _split_element(element: Any):
    """(info, data) of a dataset element: ReplaySample-like elements carry both."""
    if hasattr(element, "info") and hasattr(element, "data"):
        return element.info, element.data
    return (), element  # an empty nest, so the traced outputs hold no None leaf


class MirroredLearner:
    """Trains a model built inside `strategy.scope()` from a distributed dataset (a
    `DatasetLearner`), or from one loaded batch at a time (`learn_on_batch`).

    Args:
      build_fn: called once inside `strategy.scope()`; returns the trainee, a `Trainee` (a tfrl
        policy) or an object with `trainable_variables`, `optimizer` and (unless `loss_fn` is
        given) `loss_and_stats`, which `as_trainee` gives tape gradients over
        `trainable_variables` and `optimizer.apply_gradients`.
      loss_fn: optional per-replica loss `loss_fn(batch) -> (loss, stats, per_sample)`;
        defaults to the trainee's `loss_and_stats`. `loss` and every stat must be means over the
        replica's batch; every `per_sample` value has the batch as leading dimension.
      strategy: defaults to `default_strategy()` (every local GPU, else every CPU device). Pass
        strategies from `mirrored_strategy(devices)` rather than new MirroredStrategy objects
        when a process builds several learners (see `mirrored_strategy`).
      steps_per_call: K, the number of gradient steps one `train` call runs inside one
        `tf.function`.
      on_step: optional hook called with a `StepOutput` for each step, in order, after each
        `train` or `learn_on_batch` call.
      gradient_step_fn: optional `gradient_step_fn(trainee, grads_and_vars)` that applies the
        gradients inside the replica context; defaults to the trainee's
        `apply_gradients_op(optimizer, grads_and_vars)`. Gradients come from
        `replica_scaling.scaled_gradients`, through the trainee's `gradients` (a policy's
        clipping applies to each replica's weighted gradient).

    Raises:
      InvalidConfigError: `steps_per_call` < 1, or the trainee lacks `trainable_variables`,
        `optimizer` or a loss.
    """

    def __init__(self, build_fn: Callable[[], Any], *, loss_fn: Optional[LossFn] = None,
                 strategy: Optional[tf.distribute.Strategy] = None, steps_per_call: int = 1,
                 on_step: Optional[Callable[[StepOutput], None]] = None,
                 gradient_step_fn: Optional[Callable[[Any, list], Any]] = None):
        if int(steps_per_call) < 1:
            raise errors.InvalidConfigError(
                f"steps_per_call must be >= 1, got {steps_per_call}; pass the number of gradient "
                "steps one train() call should run")
        self.strategy = strategy or default_strategy()
        self.steps_per_call = int(steps_per_call)
        self.on_step = on_step
        self.num_steps = 0
        with self.strategy.scope():
            self.trainee = build_fn()
            self._trainee = as_trainee(self.trainee, require_loss=loss_fn is None)
            self._build_optimizer_slots()
        self._loss_fn = loss_fn or self._trainee.loss_and_stats
        self._gradient_step_fn = gradient_step_fn
        self._train_fn = None
        self._bound_fns = collections.OrderedDict()  # id(iterator) -> (iterator, traced fn)
        self._batch_fn = None
        self._output_structure = None

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    def _build_optimizer_slots(self) -> None:
        # Keras 3 optimizers must create their slots inside the scope before the first traced
        # step (otherwise the traced step fails feeding a placeholder); tf_keras ones accept it.
        optimizer = self.trainee.optimizer
        build = getattr(optimizer, "build", None)
        if build is not None and not getattr(optimizer, "built", False):
            build(list(self.trainee.trainable_variables))

    # Datasets ---------------------------------------------------------------------------------

    def distribute_dataset(self, dataset: tf.data.Dataset) -> tf.distribute.DistributedDataset:
        """Splits each element (a global batch) of `dataset` across the replicas."""
        return self.strategy.experimental_distribute_dataset(without_autotuning(dataset))

    def distribute_datasets_from_function(
            self, dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset]):
        """Per-replica datasets: `dataset_fn(input_context)` returns a dataset of per-replica
        batches (`input_context.get_per_replica_batch_size(global_batch)`); consecutive
        elements go to consecutive replicas."""
        return self.strategy.distribute_datasets_from_function(
            lambda input_context: without_autotuning(dataset_fn(input_context)))

    # Training ---------------------------------------------------------------------------------

    def _replica_step(self, element):
        info, data = _split_element(element)
        step = scaled_gradients(self._trainee, data, self._loss_fn)
        if self._gradient_step_fn is not None:
            self._gradient_step_fn(self.trainee, step.grads_and_vars)
        else:
            self._trainee.apply_gradients_op(self._trainee.optimizer, step.grads_and_vars)
        weighted_stats = {"loss": tf.cast(step.scaled_loss, tf.float32)}
        weighted_stats.update(weight_by_share(step.stats, step.share))
        return weighted_stats, step.per_sample, info, step.global_rows

    def _distributed_step(self, element):
        stats, per_sample, info, global_size = self.strategy.run(
            tf.autograph.experimental.do_not_convert(self._replica_step), args=(element,))
        reduced_stats = {name: self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                         for name, value in stats.items()}
        # Concatenated on the host rather than with strategy.gather: collectives do not take
        # uint64 (the dtype of item keys), and the hook reads these on the host anyway.
        with tf.device("/cpu:0"):
            gathered = tree.map_structure(
                lambda v: tf.concat(self.strategy.experimental_local_results(v), axis=0),
                (per_sample, info))
        first_size = self.strategy.experimental_local_results(global_size)[0]
        return reduced_stats, gathered[0], gathered[1], first_size

    def _trace_output_structure(self, iterator) -> Any:
        # No autograph: the step has no data-dependent control flow, and converting it (with the
        # dm-tree helpers it calls) took seconds of a trainer's start-up.
        concrete = tf.function(lambda it: self._distributed_step(next(it)),
                               autograph=False).get_concrete_function(iterator)
        return concrete.structured_outputs

    def _make_train_fn(self, structure):
        flat_specs = tree.flatten(structure)
        stats_count = len(tree.flatten(structure[0]))
        # autograph converts the loop below, not the step it calls (see _trace_output_structure)
        distributed_step = tf.autograph.experimental.do_not_convert(self._distributed_step)

        def train_k(iterator, max_steps):
            arrays = []
            for i, spec in enumerate(flat_specs):
                if i < stats_count or spec.shape.rank == 0:
                    arrays.append(tf.TensorArray(spec.dtype, size=0, dynamic_size=True))
                else:
                    arrays.append(tf.TensorArray(spec.dtype, size=0, dynamic_size=True,
                                                 infer_shape=False,
                                                 element_shape=tf.TensorShape([None]).concatenate(
                                                     spec.shape[1:])))
            steps = tf.constant(0)
            for _ in tf.range(max_steps):
                optional = iterator.get_next_as_optional()
                if not optional.has_value():
                    break
                outputs = tree.flatten(distributed_step(optional.get_value()))
                arrays = [a.write(steps, tf.cast(o, a.dtype)) for a, o in zip(arrays, outputs)]
                steps += 1
            results = []
            for i, (array, spec) in enumerate(zip(arrays, flat_specs)):
                if i < stats_count or spec.shape.rank == 0:
                    results.append(array.stack())
                else:
                    results.append(array.concat())
            return steps, results

        return train_k

    def _bound_train_fn(self, iterator):
        """The traced training function of `iterator`, which it captures rather than takes as an
        argument: flattening a distributed iterator's type spec on every call took about half of
        the call's Python time. One function per iterator (the last few are kept)."""
        key = id(iterator)
        entry = self._bound_fns.get(key)
        if entry is not None and entry[0] is iterator:
            self._bound_fns.move_to_end(key)
            return entry[1]
        if self._train_fn is None:
            self._output_structure = self._trace_output_structure(iterator)
            self._train_fn = self._make_train_fn(self._output_structure)
        train_k = self._train_fn
        concrete = tf.function(lambda max_steps: train_k(iterator, max_steps)).get_concrete_function(
            tf.TensorSpec([], tf.int32))
        self._bound_fns[key] = (iterator, concrete)
        while len(self._bound_fns) > _BOUND_ITERATORS_KEPT:
            self._bound_fns.popitem(last=False)
        return concrete

    def build(self, iterator) -> None:
        """Traces the training function for `iterator` without running a step (what the first
        `train` call would otherwise do), so its cost is paid when the caller chooses."""
        self._bound_train_fn(iterator)

    def release_iterators(self) -> None:
        """Drops the traced functions bound to iterators (see `_bound_train_fn`), so a finished
        iterator is freed when its owner drops it. Held there, it was freed only by a later full
        garbage collection, whose thread then waited in the iterator's destructor for tf.data's
        background threads while holding the GIL (seconds, in a process that went on training
        another trainer). The next `train` traces again."""
        self._bound_fns.clear()

    def train(self, iterator, num_steps: Optional[int] = None) -> List[StepOutput]:
        """Runs up to K steps in one `tf.function` call on `iterator` (an iterator over a
        distributed dataset from `distribute_dataset` or `distribute_datasets_from_function`).
        `num_steps` replaces K for this call (one traced function serves every count).

        Fewer than K steps run when the dataset ends (for example a `ReplayDataset` with a
        rate-limiter timeout); an empty list means it had ended. Returns one `StepOutput` per
        step and calls `on_step` with each.

        Raises:
          InvalidConfigError: `iterator` is a dataset rather than an iterator over one, or
            `num_steps` < 1.
        """
        if isinstance(iterator, (tf.data.Dataset, tf.distribute.DistributedDataset)):
            raise errors.InvalidConfigError(
                "train() takes an iterator: pass iter(learner.distribute_dataset(dataset)) and keep "
                "it between calls so each call continues where the previous one stopped")
        train_fn = self._bound_train_fn(iterator)
        if num_steps is None:
            num_steps = self.steps_per_call
        elif int(num_steps) < 1:
            raise errors.InvalidConfigError(
                f"num_steps must be >= 1, got {num_steps}; pass the number of gradient steps to run")
        steps, flat_results = train_fn(tf.constant(int(num_steps), tf.int32))
        return self._unpack(int(steps), [r.numpy() for r in flat_results])

    def _unpack(self, steps: int, flat_results: Sequence[np.ndarray]) -> List[StepOutput]:
        structure = self._output_structure
        stats_count = len(tree.flatten(structure[0]))
        flat_specs = tree.flatten(structure)
        sizes_column = flat_results[-1]
        offsets = np.concatenate([[0], np.cumsum(sizes_column[:steps])]).astype(np.int64)
        outputs = []
        for step in range(steps):
            leaves = []
            for i, (values, spec) in enumerate(zip(flat_results, flat_specs)):
                if i < stats_count or spec.shape.rank == 0:
                    leaves.append(values[step])
                else:
                    leaves.append(values[offsets[step]:offsets[step + 1]])
            stats, per_sample, info, batch_size = tree.unflatten_as(structure, leaves)
            self.num_steps += 1
            output = StepOutput(step=self.num_steps, batch_size=int(batch_size),
                                stats={k: float(v) for k, v in stats.items()},
                                per_sample=per_sample, info=info if tree.flatten(info) else None)
            outputs.append(output)
        if self.on_step is not None:
            for output in outputs:
                self.on_step(output)
        return outputs

    def learn_on_batch(self, batch: Any) -> Dict[str, Any]:
        """One gradient step on one global batch (a dict of column arrays or tensors, or a
        SampleBatch), split across the replicas in contiguous row ranges, the first
        `rows % replicas` replicas taking one row more. Every replica gets at least one row.

        Returns the step's statistics (floats, means over the batch) plus its per-sample
        outputs (arrays in batch order) under their own names, and calls `on_step`.

        Raises:
          InvalidBatchError: the batch holds no column, its columns differ in length, or it
            has fewer rows than there are replicas.
        """
        columns = {name: tree.map_structure(np.asarray, value) for name, value in dict(batch).items()}
        for name, value in columns.items():
            if any(leaf.dtype.hasobject for leaf in tree.flatten(value)):
                raise errors.InvalidBatchError(
                    f"column {name!r} holds Python objects; pass only the numeric columns the "
                    "loss reads")
        lengths = {np.shape(leaf)[0] if np.ndim(leaf) else -1 for leaf in tree.flatten(columns)}
        if len(lengths) != 1 or -1 in lengths:
            raise errors.InvalidBatchError(
                f"learn_on_batch got columns of {len(lengths)} different lengths {sorted(lengths)} "
                "(-1: a scalar); pass a batch of at least one column, each with one row per sample")
        rows, replicas = lengths.pop(), self.num_replicas
        if rows < replicas:
            raise errors.InvalidBatchError(
                f"learn_on_batch got {rows} rows for {replicas} replicas; pass at least one row "
                "per replica")
        bounds = [i * (rows // replicas) + min(i, rows % replicas) for i in range(replicas + 1)]

        def replica_rows(context):
            replica = context.replica_id_in_sync_group
            start, stop = bounds[replica], bounds[replica + 1]
            return tree.map_structure(lambda column: tf.constant(column[start:stop]), columns)

        values = self.strategy.experimental_distribute_values_from_function(replica_rows)
        if self._batch_fn is None:
            self._batch_fn = tf.function(self._distributed_step, reduce_retracing=True, autograph=False)
        stats, per_sample, info, batch_size = self._batch_fn(values)
        self.num_steps += 1
        output = StepOutput(step=self.num_steps, batch_size=int(batch_size),
                            stats={k: float(v) for k, v in stats.items()},
                            per_sample={k: v.numpy() for k, v in per_sample.items()})
        if self.on_step is not None:
            self.on_step(output)
        return dict(output.stats, **output.per_sample)

    def get_weights(self) -> List[np.ndarray]:
        """The trainable variables as numpy arrays (replica 0's copy; all copies are equal)."""
        return [v.numpy() for v in self.trainee.trainable_variables]

    def set_weights(self, weights: Sequence[np.ndarray]) -> None:
        """Assigns `get_weights` arrays to the trainable variables (every replica's copy).

        Raises:
          CheckpointError: their number or shapes do not fit the trainable variables.
        """
        variables = list(self.trainee.trainable_variables)
        weights = list(weights)
        if len(weights) != len(variables) or any(
                tuple(np.shape(w)) != tuple(v.shape) for w, v in zip(weights, variables)):
            raise errors.CheckpointError(
                f"set_weights got {len(weights)} arrays of shapes {[np.shape(w) for w in weights]} "
                f"for variables of shapes {[tuple(v.shape) for v in variables]}; pass the list "
                "get_weights returns for a learner of the same model")
        for variable, value in zip(variables, weights):
            variable.assign(value)


def mean_stats(outputs: Sequence[StepOutput],
               previous: Optional[Dict[str, float]] = None) -> Dict[str, float]:
    """Averages each statistic over steps (each step already averaged over its global batch).

    A statistic that a step did not compute is NaN there (TD3's actor loss between its delayed
    updates) and is averaged over the steps that did compute it. When no step did, it keeps its
    value in `previous` (the statistics of the learner's call before), or stays NaN."""
    if not outputs:
        return {}
    names = list(outputs[0].stats)
    values = np.array([[o.stats[name] for name in names] for o in outputs], np.float64)
    computed = ~np.isnan(values)
    counts = computed.sum(axis=0)
    means = np.where(computed, values, 0.0).sum(axis=0) / np.maximum(counts, 1)
    previous = previous or {}
    return {name: float(mean) if count else float(previous.get(name, np.nan))
            for name, mean, count in zip(names, means, counts)}
