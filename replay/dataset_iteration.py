"""Eager iteration of replay datasets without tf.data's per-element structure rebuilding.

Part of the dataset (replay/dataset.py): `ReplayDataset`, the batched datasets its `batch`
returns and the datasets that common transformations (`prefetch`, `map`, `take`, ...) make
of them iterate with `FastIterator`, an `OwnedIterator` that, when executing eagerly, packs
each element's tensors straight into the element structure (a `ReplaySample` of a
`SampleInfo` and the data nest) with a packer built once per iterator. tf.data's own path
flattens the element spec and rebuilds the nest through its generic nest functions for every
element, and checks each tensor's shape again: on the 2-core machine that was a third of the
main thread's time when a learner loop took batches of 32 small items
(`tools/replay_workload.py --case dataset`). The iterator op itself already checks dtypes and
shapes against the element spec, so the result is the same object structure with the same
tensors. Element specs with anything but plain `tf.TensorSpec` leaves (sparse or ragged
components), or nests other than tuples, named tuples and dicts, take tf.data's path; so does
everything inside a `tf.function`.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops, iterator_ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.data.util import nest as data_nest  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.eager import context  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import gen_dataset_ops  # pylint: disable=g-direct-tensorflow-import

Packer = Callable[[List[tf.Tensor]], Any]


def element_packer(element_spec: Any) -> Optional[Packer]:
    """A function from the flat list of an element's tensors (as the iterator op returns them)
    to the element, equal to what tf.data builds; None when the spec needs tf.data's own path
    (a leaf that is not a plain `tf.TensorSpec`, or a nest other than tuples, named tuples and
    plain dicts)."""
    leaves = data_nest.flatten(element_spec)
    if not all(type(leaf) is tf.TensorSpec for leaf in leaves):
        return None
    # tf.data's own packing, once, of the positions: the order of the leaves is its order.
    template = data_nest.pack_sequence_as(element_spec, list(range(len(leaves))))
    return _packer_of(template)


def _packer_of(template: Any) -> Optional[Packer]:
    if type(template) is int:
        index = template
        return lambda flat: flat[index]
    if type(template) is dict:
        keys = list(template)
        parts = [_packer_of(template[key]) for key in keys]
        if None in parts:
            return None
        return lambda flat: {key: part(flat) for key, part in zip(keys, parts)}
    if isinstance(template, tuple):
        parts = [_packer_of(value) for value in template]
        if None in parts:
            return None
        if type(template) is tuple:
            return lambda flat: tuple(part(flat) for part in parts)
        if hasattr(template, "_fields"):  # a named tuple: positional construction
            cls = type(template)
            if len(parts) == 2:  # ReplaySample(info, data): the common case, unrolled
                first, second = parts
                return lambda flat: cls(first(flat), second(flat))
            return lambda flat: cls(*[part(flat) for part in parts])
    return None


class FastIterator(iterator_ops.OwnedIterator):
    """`iter(dataset)` of a replay dataset: a `tf.data.Iterator` (checkpointable, usable inside
    and outside `tf.function`) whose eager `next` packs elements with `element_packer`."""

    def _create_iterator(self, dataset):
        super()._create_iterator(dataset)
        self._packer = element_packer(self._element_spec)

    def _next_internal(self):
        packer = getattr(self, "_packer", None)
        if packer is None or not context.executing_eagerly():
            return super()._next_internal()
        # As tf.data's eager path: synchronous, so the end of the data is an error here.
        with context.execution_mode(context.SYNC):
            flat = gen_dataset_ops.iterator_get_next(
                self._iterator_resource, output_types=self._flat_output_types,
                output_shapes=self._flat_output_shapes)
            return packer(flat)


def fast_iter(dataset: tf.data.Dataset) -> iterator_ops.OwnedIterator:
    """What `tf.data.Dataset.__iter__` returns for `dataset`, as a `FastIterator`.

    Raises:
      RuntimeError: not executing eagerly and not inside a `tf.function` (as tf.data).
    """
    if context.executing_eagerly() or ops.inside_function():
        with ops.colocate_with(dataset._variant_tensor):  # noqa: SLF001 - as tf.data's __iter__
            return FastIterator(dataset)
    raise RuntimeError("`tf.data.Dataset` only supports Python-style iteration in eager mode or "
                       "within tf.function.")


# Transformations of one dataset into one, whose results iterate with `FastIterator` too when
# applied to a replay dataset (learners add `prefetch`, `map` and the like after `batch`).
_CHAINED_TRANSFORMATIONS = ("batch", "cache", "enumerate", "filter", "ignore_errors", "map",
                            "padded_batch", "prefetch", "rebatch", "repeat", "shard", "shuffle",
                            "skip", "take", "take_while", "unbatch", "unique", "with_options")


def keep_fast_iteration(result: Any) -> Any:
    """`result` (what a transformation returned) as a `FastIterationDataset` when it is a
    `tf.data.Dataset`, or as a `FastIterationDatasetV1` when it is the `tf.compat.v1` adapter
    of one (what transformations of `tf.compat.v1` datasets return); anything else as it is."""
    if isinstance(result, FastIteration):
        return result
    if type(result) is dataset_ops.DatasetV1Adapter:
        return FastIterationDatasetV1(result._dataset)  # noqa: SLF001 - the dataset it adapts
    if isinstance(result, tf.data.Dataset) and not isinstance(result, tf.compat.v1.data.Dataset):
        return FastIterationDataset(result)
    return result


class FastIteration:
    """A base of replay datasets, before `tf.data.Dataset`: `iter()` gives a `FastIterator`,
    and so do the datasets that `_CHAINED_TRANSFORMATIONS` and `apply` return."""

    def __iter__(self):
        return fast_iter(self)

    def apply(self, transformation_func):
        """As `tf.data.Dataset.apply`; a dataset it returns iterates with `FastIterator`."""
        return keep_fast_iteration(super().apply(transformation_func))


def _chained(name: str):
    def transformation(self, *args, **kwargs):
        return keep_fast_iteration(getattr(super(FastIteration, self), name)(*args, **kwargs))

    transformation.__name__ = transformation.__qualname__ = name
    transformation.__doc__ = (f"As `tf.data.Dataset.{name}`; the dataset it returns iterates with "
                              "`FastIterator` (see `replay.dataset_iteration`).")
    return transformation


for _name in _CHAINED_TRANSFORMATIONS:
    setattr(FastIteration, _name, _chained(_name))


class FastIterationDataset(FastIteration, tf.data.Dataset):
    """A dataset that is `inner` (its variant tensor and element spec), iterated with
    `FastIterator`: what `ReplayDataset.batch` and the transformations of replay datasets
    return."""

    def __init__(self, inner: tf.data.Dataset):
        self._inner = inner
        tf.data.Dataset.__init__(self, inner._variant_tensor)  # noqa: SLF001 - how tf.data subclasses are built

    def _inputs(self):
        return [self._inner]

    @property
    def element_spec(self):
        return self._inner.element_spec


class FastIterationDatasetV1(FastIteration, dataset_ops.DatasetV1Adapter):
    """`tf.compat.v1`'s adapter of a dataset (what transformations of `tf.compat.v1` datasets
    such as `replay.reverb.TrajectoryDataset` return), iterated with `FastIterator`."""
