"""Eager iteration of ReplayDataset and its batches (`replay.dataset_iteration`): the elements
are those tf.data's own iterator builds (structure, container types, values, dtypes, shapes),
the end of the data is StopIteration, and the iterators still work inside tf.function, against
a real replay server on loopback."""
import collections

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.data.ops import iterator_ops

from replay.dataset import ReplayDataset
from replay.dataset_iteration import FastIterator, element_packer
from replay.replay_sample import ReplaySample, SampleInfo

pytestmark = pytest.mark.timeout(120)

Pair = collections.namedtuple("Pair", ["left", "right"])


def _assert_identical(got, expected):
    """Same nest with the same container types at every level, same tensors."""
    tf.nest.assert_same_structure(got, expected, check_types=True)
    for a, b in zip(tf.nest.flatten(got), tf.nest.flatten(expected)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("element", [
    {"b": tf.constant([1, 2]), "a": (tf.constant(1.5), Pair(tf.constant([[1]]), tf.constant(b"x")))},
    (tf.constant(3), {"z": tf.constant([0.5]), "y": tf.constant(True)}, tf.constant(4)),
    Pair({"k": tf.zeros([2, 3], tf.uint8)}, (tf.constant(-1, tf.int64),)),
    tf.constant([7, 8, 9]),
])
def test_the_packer_builds_what_tf_data_builds(element):
    dataset = tf.data.Dataset.from_tensors(element).repeat(3)
    packer = element_packer(dataset.element_spec)
    assert packer is not None
    stock = next(iterator_ops.OwnedIterator(dataset))
    flat = tf.nest.flatten(stock)
    _assert_identical(packer(flat), stock)


def test_specs_with_composite_leaves_take_tf_datas_own_path():
    ragged = tf.data.Dataset.from_tensors({"r": tf.ragged.constant([[1], [2, 3]]), "d": tf.constant(1)})
    assert element_packer(ragged.element_spec) is None
    sparse = tf.data.Dataset.from_tensors(tf.sparse.from_dense([[0, 1]]))
    assert element_packer(sparse.element_spec) is None


def _dataset(client, table="queue", **options):
    return ReplayDataset.from_table_signature(client.address, table, max_in_flight_samples_per_worker=7,
                                              num_workers_per_iterator=1, rate_limiter_timeout_ms=2000, **options)


@pytest.mark.parametrize("batch_size", [None, 4])
def test_replay_datasets_iterate_eagerly_to_the_elements_tf_data_builds(start_server, helpers, batch_size):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(40))

    def make():
        dataset = _dataset(client)
        return dataset if batch_size is None else dataset.batch(batch_size)

    fast_iterator = iter(make())
    assert isinstance(fast_iterator, FastIterator)
    fast = list(fast_iterator)  # ends with StopIteration when the timeout ends the data
    helpers.write_steps(client, "queue", range(40))
    stock = list(iterator_ops.OwnedIterator(make()))
    assert len(fast) == len(stock) == (40 if batch_size is None else 10)
    for got, expected in zip(fast, stock):
        assert type(got) is ReplaySample and type(got.info) is SampleInfo
        _assert_identical(got.data, expected.data)
        for name in ("probability", "table_size", "priority", "times_sampled"):
            assert getattr(got.info, name).dtype == getattr(expected.info, name).dtype
    actions = [e.data["action"].numpy().tolist() for e in fast]
    assert actions == (list(range(40)) if batch_size is None
                       else [list(range(i, i + 4)) for i in range(0, 40, 4)])


def test_the_iterator_works_inside_tf_function_and_after_transformations(start_server, helpers):
    server = start_server([helpers.queue_table(), helpers.queue_table("other")])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(12))
    dataset = _dataset(client)
    iterator = iter(dataset.batch(3))

    @tf.function
    def take_two(it):
        return next(it).data["action"] + next(it).data["action"]

    np.testing.assert_array_equal(take_two(iterator).numpy(), [3, 5, 7])  # [0,1,2] + [3,4,5]
    assert next(iterator).data["action"].numpy().tolist() == [6, 7, 8]  # eager, same iterator
    dataset.close()

    # after a transformation, a new dataset and iterator on another table
    mapped = _dataset(client, "other").batch(2).map(lambda sample: sample.data["action"] * 10)
    helpers.write_steps(client, "other", range(20, 23))
    assert [x.numpy().tolist() for x in mapped] == [[200, 210], [220]]


def test_learner_pipelines_built_on_replay_datasets_iterate_fast_too(start_server, helpers):
    """The transformations learners add after `batch` (Acme's `prefetch`, a `map`, `take`) keep
    the fast iterator, on TF2's datasets and on `tf.compat.v1` ones (replay.reverb's
    TrajectoryDataset), which stay `tf.compat.v1` datasets."""
    import replay.reverb as reverb

    server = start_server([helpers.queue_table(name) for name in ("queue", "unbatched", "legacy")])
    client = server.localhost_client()
    for name in ("queue", "unbatched", "legacy"):
        helpers.write_steps(client, name, range(6))
    pipeline = _dataset(client).batch(2).prefetch(2).map(lambda sample: sample.data["action"]).take(2)
    iterator = iter(pipeline)
    assert isinstance(iterator, FastIterator)
    assert [x.numpy().tolist() for x in iterator] == [[0, 1], [2, 3]]
    unbatched = iter(_dataset(client, "unbatched").prefetch(1))
    assert isinstance(unbatched, FastIterator)
    assert [next(unbatched).data["action"].numpy() for _ in range(6)] == list(range(6))

    legacy = reverb.TrajectoryDataset.from_table_signature(
        client.address, "legacy", max_in_flight_samples_per_worker=3, rate_limiter_timeout_ms=2000)
    batched = legacy.batch(2, drop_remainder=True).prefetch(1)
    assert isinstance(batched, tf.compat.v1.data.Dataset)
    iterator = iter(batched)
    assert isinstance(iterator, FastIterator)
    assert [b.data["action"].numpy().tolist() for b in iterator] == [[0, 1], [2, 3], [4, 5]]
