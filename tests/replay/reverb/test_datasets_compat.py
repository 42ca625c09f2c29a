"""replay.reverb datasets as Reverb's: per-step signatures accepted for whole items, items
without a time dimension as one step, list nests as tuples, exact `max_samples` with no
prefetch beyond it, and tf.compat.v1 iterators in graph mode."""
import threading

import numpy as np
import pytest
import tensorflow as tf

import replay.reverb as reverb


@pytest.fixture
def server():
    tables = [
        reverb.Table.queue("q", 20),
        reverb.Table.queue("steps", 20, signature={"obs": tf.TensorSpec([None, 2], tf.float32)}),
    ]
    srv = reverb.Server(tables=tables)
    yield srv
    srv.stop()


def test_legacy_writer_items_fit_a_per_step_signature_and_mismatches_are_refused(server):
    client = server.localhost_client()
    with client.writer(4) as writer:
        for i in range(4):
            writer.append({"obs": np.full((3, 2), i, np.float32)})  # column (4, 3, 2), step (3, 2)
        writer.create_item("steps", 4, 1.0)
    assert client.server_info()["steps"].current_size == 1
    with pytest.raises(reverb.errors.SignatureMismatchError, match="one step"):
        with client.writer(2) as writer:
            writer.append({"obs": np.zeros((3, 5), np.float32)})  # neither (None, 2) nor a step of it
            writer.create_item("steps", 1, 1.0)
    assert client.server_info()["steps"].current_size == 1


def test_timestep_dataset_reads_inserted_items_as_one_step_and_lists_as_tuples(server):
    client = server.localhost_client()
    client.insert([np.ones([1, 1], np.int32), np.float32(7)], {"q": 1})  # no time dimension
    with client.writer(3) as writer:
        for i in range(2):
            writer.append([np.ones([1, 1], np.int32), np.float32(i)])
        writer.create_item("q", 2, 1.0)
    ds = reverb.TimestepDataset(server.address, "q", dtypes=[tf.int32, tf.float32], shapes=[[1, 1], []],
                                max_in_flight_samples_per_worker=1, max_samples=2)  # items
    assert isinstance(ds.element_spec.data, tuple)
    values = [float(s.data[1]) for s in ds]
    ds.close()
    assert values == [7.0, 0.0, 1.0]


def test_max_samples_requests_no_sample_beyond_it(server):
    client = server.localhost_client()
    for i in range(10):
        client.insert(np.int64(i), {"q": 1})
    ds = reverb.TimestepDataset(server.address, "q", tf.int64, tf.TensorShape([]),
                                max_in_flight_samples_per_worker=5, num_workers_per_iterator=3, max_samples=4)
    assert [int(s.data) for s in ds] == [0, 1, 2, 3]
    ds.close()
    assert client.server_info()["q"].current_size == 6


def test_graph_mode_iterators_on_the_datasets_and_their_batches(server):
    client = server.localhost_client()
    for i in range(4):
        client.insert(np.int64(i), {"q": 1})
    with tf.Graph().as_default():
        ds = reverb.TimestepDataset(server.address, "q", tf.int64, tf.TensorShape([]),
                                    max_in_flight_samples_per_worker=1, max_samples=4)
        assert isinstance(ds, tf.compat.v1.data.Dataset) and isinstance(ds, tf.data.Dataset)
        iterator = ds.batch(2).make_initializable_iterator()
        batch = iterator.get_next()
        with tf.compat.v1.Session() as sess:
            sess.run(iterator.initializer)
            assert sess.run(batch).data.tolist() == [0, 1]
            assert sess.run(batch).data.tolist() == [2, 3]
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(batch)
        trajectories = reverb.TrajectoryDataset(server.address, "q", tf.int64, tf.TensorShape([]),
                                                max_in_flight_samples_per_worker=1, max_samples=1)
        assert hasattr(trajectories, "make_one_shot_iterator")
        ds.close()
        trajectories.close()


@pytest.mark.timeout(60)
def test_closing_a_session_cancels_a_read_waiting_on_an_empty_table(server):
    with tf.Graph().as_default():
        ds = reverb.TimestepDataset(server.address, "q", tf.int64, tf.TensorShape([]),
                                    max_in_flight_samples_per_worker=1)
        iterator = ds.make_initializable_iterator()
        step = iterator.get_next()
        sess = tf.compat.v1.Session()
        sess.run(iterator.initializer)
        closer = threading.Timer(1.0, sess.close)
        closer.start()
        try:
            with pytest.raises(tf.errors.CancelledError):
                sess.run(step)  # the table stays empty: only the close can end this
        finally:
            closer.join()
            ds.close()
    # the server serves on: a new dataset reads what is inserted next
    server.localhost_client().insert(np.int64(7), {"q": 1})
    again = reverb.TimestepDataset(server.address, "q", tf.int64, tf.TensorShape([]),
                                   max_in_flight_samples_per_worker=1, max_samples=1)
    assert [int(s.data) for s in again] == [7]


def test_a_table_the_server_lacks_is_a_value_error_naming_the_tables_it_has(server):
    for dataset in (reverb.TrajectoryDataset, reverb.TimestepDataset):
        with pytest.raises(ValueError, match="does not contain any table named nope. Found: q, steps"):
            dataset.from_table_signature(server.address, "nope", max_in_flight_samples_per_worker=1)
