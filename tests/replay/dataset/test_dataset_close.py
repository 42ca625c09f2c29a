"""`replay_close()` ends a dataset's streams at once, also those waiting for samples that will not
come (a drained queue of a server that keeps running), so its iterator can be released."""

import threading
import time

import pytest

from replay.dataset import ReplayDataset
from tests.background_reads import next_in_background

pytestmark = pytest.mark.timeout(120)


def test_replay_close_ends_a_stream_waiting_on_an_empty_table(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(3))
    dataset = ReplayDataset.from_table_signature(client.address, "queue",
                                                 max_in_flight_samples_per_worker=4)  # waits forever
    iterator = iter(dataset)
    assert sorted(int(next(iterator).data["action"]) for _ in range(3)) == [0, 1, 2]

    reader, outcome = next_in_background(iterator)
    reader.join(timeout=1.0)
    assert reader.is_alive()  # the queue is drained: the stream waits for a sample
    dataset.replay_close()
    reader.join(timeout=60)
    assert outcome == ["ended"]  # end of sequence, not an error, and not a stuck stream
    del iterator
    # The server was not stopped and still serves others.
    helpers.write_steps(client, "queue", [7])
    assert client.server_info(timeout=10)["queue"].num_inserts == 4


def test_close_ends_the_streams_of_pipelines_built_on_the_dataset(start_server, helpers):
    """`ReplayDataset` is a tf.data.Dataset that owns its streams: `.batch().map()` pipelines
    built on it lose nothing of tf.data, and closing the dataset (here by leaving its `with`
    block) ends their iterators too, while they wait on an empty table."""
    import tensorflow as tf

    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(4))
    with ReplayDataset.from_table_signature(client.address, "queue",
                                            max_in_flight_samples_per_worker=4) as dataset:
        assert isinstance(dataset, tf.data.Dataset)
        iterator = iter(dataset.batch(2).map(lambda sample: sample.data["action"]))
        assert [next(iterator).numpy().tolist() for _ in range(2)] == [[0, 1], [2, 3]]
        reader, outcome = next_in_background(iterator)
        reader.join(timeout=1.0)
        assert reader.is_alive() and not dataset.closed  # waiting for samples that will not come
    reader.join(timeout=60)
    assert outcome == ["ended"]
    assert dataset.closed and dataset.metrics.total_samples == 4
    # A closed dataset opens no new streams: a new iterator ends at once, though items wait.
    helpers.write_steps(client, "queue", [9])
    assert list(dataset.batch(1)) == []
    assert client.server_info(timeout=10)["queue"].current_size == 1


def test_close_ends_the_reader_threads_of_an_iterator_that_is_kept_but_no_longer_read(
        start_server, helpers):
    """A trainer that stops keeps its tf.data iterator: closing the dataset must still end the
    threads reading ahead for it (blocked on a full prefetch queue), not leave one per stream."""
    server = start_server([helpers.uniform_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "uniform", range(4))

    def readers():
        return {t for t in threading.enumerate() if t.name == "replay-dataset-reader"}

    before = readers()
    dataset = ReplayDataset.from_table_signature(client.address, "uniform",
                                                 max_in_flight_samples_per_worker=4)
    iterator = iter(dataset)
    assert int(next(iterator).data["action"]) in range(4)
    started = readers() - before
    assert started  # reading ahead of the consumer: the table samples without end
    time.sleep(0.5)  # the prefetch queue fills and the reader waits for room
    dataset.close()
    deadline = time.monotonic() + 30
    while any(t.is_alive() for t in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(t.is_alive() for t in started)
    assert iterator is not None  # still held, never read again
    # The server was not stopped and still serves others.
    assert client.server_info(timeout=10)["uniform"].num_inserts == 4
