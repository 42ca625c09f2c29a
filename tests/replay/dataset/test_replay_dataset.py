"""ReplayDataset against a real replay server on loopback."""
import time

import numpy as np
import pytest
import tensorflow as tf

from replay import errors, specs
from replay.dataset import INFO_DTYPES, ReplayDataset, StreamMetrics
from replay.sample_blocks import BlockPool
from replay.replay_sample import ReplaySample, SampleInfo
from replay.table import Table
from tfrl.learner.mirrored_learner import mirrored_strategy

pytestmark = pytest.mark.timeout(120)


def _check_step(data, i, helpers):
    expected = helpers.make_step(i)
    np.testing.assert_array_equal(data["observation"], expected["observation"])
    assert data["action"] == expected["action"]
    assert data["flags"]["done"] == expected["flags"]["done"]
    np.testing.assert_array_equal(data["flags"]["frame"], expected["flags"]["frame"])


def _all_elements(dataset):
    return [tf.nest.map_structure(lambda t: t.numpy(), e) for e in dataset]


def test_from_table_signature_yields_replay_samples_in_the_table_structure(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(20))
    dataset = ReplayDataset.from_table_signature(
        client.address, "queue", max_in_flight_samples_per_worker=8, num_workers_per_iterator=1,
        rate_limiter_timeout_ms=300)
    assert isinstance(dataset, tf.data.Dataset)
    spec = dataset.element_spec
    assert isinstance(spec, ReplaySample) and isinstance(spec.info, SampleInfo)
    assert spec.info == SampleInfo(*[tf.TensorSpec([], d) for d in INFO_DTYPES])
    assert spec.data["flags"]["frame"] == tf.TensorSpec([2, 2], tf.uint8)
    assert spec.data["observation"] == tf.TensorSpec([3], tf.float32)
    elements = _all_elements(dataset)
    # A queue read by one worker: every item once, in insertion order, then the timeout ends it.
    assert [int(e.data["action"]) for e in elements] == list(range(20))
    for i, element in enumerate(elements):
        _check_step(element.data, i, helpers)
        assert element.info.times_sampled == 1
        assert element.info.probability == pytest.approx(1.0)
    assert len({int(e.info.key) for e in elements}) == 20
    assert client.server_info()["queue"].current_size == 0
    assert dataset.replay_metrics.total_samples == 20
    assert dataset.replay_metrics.snapshot()[client.address].timeouts == 1


def test_several_workers_read_every_item_exactly_once(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(600))
    dataset = ReplayDataset.from_table_signature(
        client.address, "queue", max_in_flight_samples_per_worker=32, num_workers_per_iterator=3,
        rate_limiter_timeout_ms=300)
    actions = [int(e.data["action"]) for e in _all_elements(dataset)]
    assert sorted(actions) == list(range(600))
    metrics = dataset.replay_metrics.snapshot()[client.address]
    assert metrics.streams_opened == 3 and metrics.timeouts == 3


def test_timeout_on_an_empty_table_ends_the_dataset_without_error(start_server, helpers):
    server = start_server([helpers.uniform_table()])
    dataset = ReplayDataset.from_table_signature(
        server.localhost_client().address, "uniform", max_in_flight_samples_per_worker=4,
        rate_limiter_timeout_ms=0)
    assert _all_elements(dataset.batch(4)) == []


def test_batched_elements_keep_info_and_data_aligned(start_server, helpers):
    server = start_server([helpers.uniform_table(max_size=100)])
    client = server.localhost_client()
    helpers.write_steps(client, "uniform", range(50))
    dataset = ReplayDataset.from_table_signature(client.address, "uniform", max_in_flight_samples_per_worker=64)
    batch = next(iter(dataset.batch(32, drop_remainder=True)))
    assert batch.data["observation"].shape == (32, 3)
    assert batch.info.key.shape == (32,) and batch.info.table_size.numpy().tolist() == [50] * 32
    actions = batch.data["action"].numpy()
    np.testing.assert_array_equal(batch.data["observation"].numpy()[:, 0], actions.astype(np.float32))
    np.testing.assert_array_equal(batch.data["flags"]["frame"].numpy()[:, 0, 0], actions % 251)


def test_explicit_dtypes_and_shapes_and_max_samples_per_stream(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(40))
    dtypes = tf.nest.map_structure(lambda s: tf.as_dtype(s.dtype), helpers.STEP_SIGNATURE)
    shapes = tf.nest.map_structure(lambda s: list(s.shape), helpers.STEP_SIGNATURE,)
    metrics = StreamMetrics()
    dataset = ReplayDataset(client.address, "queue", dtypes, shapes, max_in_flight_samples_per_worker=4,
                            num_workers_per_iterator=1, max_samples_per_stream=7,
                            rate_limiter_timeout_ms=300, metrics=metrics)
    assert [int(e.data["action"]) for e in _all_elements(dataset)] == list(range(40))
    # 40 samples with streams of at most 7: a new stream after every 7.
    assert metrics.snapshot()[client.address].streams_opened == 6


def test_multi_step_items_spanning_chunks_and_compressed_columns(start_server):
    signature = {"obs": specs.TensorSpec((3, 16), np.float32), "step": specs.TensorSpec((3,), np.int32)}
    table = Table.queue("sequences", 100, signature=signature)
    server = start_server([table])
    client = server.localhost_client()
    with client.trajectory_writer(3, chunk_length=2) as writer:
        for t in range(10):
            # Constant rows compress well, so these columns travel lz4-compressed.
            writer.append({"obs": np.full(16, t, np.float32), "step": np.int32(t)})
            if t >= 2:
                writer.create_item("sequences", 1.0, {"obs": writer.history["obs"][-3:],
                                                      "step": writer.history["step"][-3:]})
        writer.flush()
    dataset = ReplayDataset.from_table_signature(client.address, "sequences", 16, num_workers_per_iterator=1,
                                                 rate_limiter_timeout_ms=300)
    elements = _all_elements(dataset)
    assert len(elements) == 8
    for end, element in enumerate(elements, start=2):
        steps = np.arange(end - 2, end + 1)
        np.testing.assert_array_equal(element.data["step"], steps)
        np.testing.assert_array_equal(element.data["obs"], np.repeat(steps[:, None], 16, 1).astype(np.float32))


def test_step_items_of_long_chunks_travel_columnar(start_server, helpers):
    # Step items that share 16-step chunks: the server sends only the sampled steps, one byte
    # string per column, and the dataset's values still line up item by item.
    server = start_server([helpers.uniform_table()])
    client = server.localhost_client()
    with client.trajectory_writer(1, chunk_length=16) as writer:
        for i in range(64):
            writer.create_item("uniform", 1.0, writer.append(helpers.make_step(i)))
        writer.flush()
    response = next(iter(client.sample_responses("uniform", 8, columnar=True)))
    assert response.response.HasField("columns") and not response.response.chunks.keys
    num_items = len(response.response.items.keys)
    # flat columns in dm-tree order: action, flags.done, flags.frame, observation
    assert [len(d) for d in response.response.columns.data] == [num_items * n for n in (8, 1, 4, 12)]
    plain = next(iter(client.sample_responses("uniform", 8)))
    assert not plain.response.HasField("columns") and plain.response.chunks.keys

    dataset = ReplayDataset.from_table_signature(client.address, "uniform", 32,
                                                 num_workers_per_iterator=1)
    for element in dataset.take(100):
        _check_step(element.data, int(element.data["action"]), helpers)
    dataset.replay_close()


def test_wrong_dtype_fails_the_iteration_with_a_clear_message(start_server, helpers):
    server = start_server([helpers.queue_table(signature=None)])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(3))
    dtypes = tf.nest.map_structure(lambda s: tf.as_dtype(s.dtype), helpers.STEP_SIGNATURE)
    dtypes["action"] = tf.float64
    shapes = tf.nest.map_structure(lambda s: list(s.shape), helpers.STEP_SIGNATURE)
    dataset = ReplayDataset(client.address, "queue", dtypes, shapes, 4, num_workers_per_iterator=1,
                            rate_limiter_timeout_ms=300)
    with pytest.raises(tf.errors.OpError, match="dtype int64 but the dataset declares float64"):
        _all_elements(dataset)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("in_graph", [False, True])
def test_a_missing_table_fails_the_iteration_with_not_found_as_reverb(start_server, helpers, workers, in_graph):
    # tf.data runs the streams' generators through TensorFlow's PyFunc kernel, which would read
    # the error as UnknownError; Reverb's dataset op fails with the server's NOT_FOUND.
    server = start_server([helpers.queue_table()])
    dataset = ReplayDataset(server.localhost_client().address, "missing", tf.int64, [], 4,
                            num_workers_per_iterator=workers, rate_limiter_timeout_ms=300)
    if in_graph:
        first = tf.function(lambda: next(iter(dataset)))
    else:
        def first():
            return next(iter(dataset))
    with pytest.raises(tf.errors.NotFoundError, match="missing"):
        first()


@pytest.mark.parametrize("change", ["dtype", "shape", "leaves"])
def test_a_request_that_does_not_fit_the_table_signature_fails_at_once_even_on_an_empty_table(
        start_server, helpers, change):
    # Without the check, an empty table would keep the iteration waiting for a sample forever.
    server = start_server([helpers.queue_table()])
    dtypes = tf.nest.map_structure(lambda s: tf.as_dtype(s.dtype), helpers.STEP_SIGNATURE)
    shapes = tf.nest.map_structure(lambda s: list(s.shape), helpers.STEP_SIGNATURE)
    if change == "dtype":
        dtypes["action"], expected = tf.float64, r"index 0 .*\(double, \[\]\).*\(int64, \[\]\) at action"
    elif change == "shape":
        shapes["observation"], expected = [4], r"\(float, \[4\]\).*\(float, \[3\]\) at observation"
    else:
        dtypes["extra"], shapes["extra"] = tf.float32, []
        expected = "Requested 5 tensors, but table signature shows 4 tensors"
    dataset = ReplayDataset(server.localhost_client().address, "queue", dtypes, shapes, 4)
    with pytest.raises(tf.errors.InvalidArgumentError, match=expected):
        next(iter(dataset))


def test_items_with_a_leading_time_dimension_fit_a_signature_of_one_step(start_server, helpers):
    server = start_server([helpers.queue_table(signature={"action": specs.TensorSpec((), np.int64)})])
    client = server.localhost_client()
    # (Reverb's writer check would refuse the [2] column of a [] spec; the server takes it as steps)
    with client.trajectory_writer(2, validate_items=False) as writer:
        for i in range(2):
            writer.append({"action": np.int64(i)})
        writer.create_item("queue", 1.0, {"action": writer.history["action"][-2:]})
        writer.flush()
    dataset = ReplayDataset(client.address, "queue", {"action": tf.int64}, {"action": [2]}, 4,
                            rate_limiter_timeout_ms=300)
    assert [s.data["action"].numpy().tolist() for s in dataset] == [[0, 1]]


def test_bad_arguments_raise_named_errors(start_server, helpers):
    server = start_server([helpers.queue_table()])
    address = server.localhost_client().address
    dtypes, shapes = tf.float32, [3]
    with pytest.raises(errors.InvalidArgumentError, match="max_in_flight_samples_per_worker"):
        ReplayDataset(address, "queue", dtypes, shapes, 0)
    with pytest.raises(errors.InvalidArgumentError, match="num_workers_per_iterator"):
        ReplayDataset(address, "queue", dtypes, shapes, 4, num_workers_per_iterator=0)
    with pytest.raises(errors.InvalidArgumentError, match="rate_limiter_timeout_ms"):
        ReplayDataset(address, "queue", dtypes, shapes, 4, rate_limiter_timeout_ms=-5)
    with pytest.raises(errors.InvalidArgumentError, match="same nest structure"):
        ReplayDataset(address, "queue", {"a": tf.float32}, {"b": [3]}, 4)
    with pytest.raises(errors.InvalidArgumentError, match="server_address"):
        ReplayDataset([], "queue", dtypes, shapes, 4)
    with pytest.raises(errors.NotFoundError, match="no table 'nope'"):
        ReplayDataset.from_table_signature(address, "nope", 4)
    server_without_signature = start_server([Table.queue("plain", 10)])
    with pytest.raises(errors.InvalidArgumentError, match="has no signature"):
        ReplayDataset.from_table_signature(server_without_signature.localhost_client().address, "plain", 4)


def test_each_replica_gets_its_own_per_replica_batch(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(64))
    strategy = mirrored_strategy(["/cpu:0", "/cpu:1"])
    global_batch = 8

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(global_batch)
        return ReplayDataset.from_table_signature(
            client.address, "queue", 16, num_workers_per_iterator=1,
            rate_limiter_timeout_ms=300).batch(per_replica, drop_remainder=True)

    distributed = strategy.distribute_datasets_from_function(dataset_fn)
    seen = []
    for element in distributed:
        per_replica = strategy.experimental_local_results(element)
        assert len(per_replica) == 2
        for replica_batch in per_replica:
            assert replica_batch.data["action"].shape == (4,)
            seen.append(replica_batch.data["action"].numpy())
    actions = np.concatenate(seen)
    assert sorted(actions.tolist()) == list(range(64))
    # The two replicas of a step hold different samples.
    assert not np.array_equal(seen[0], seen[1])


def test_reading_inside_a_tf_function_loop(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(96))
    dataset = ReplayDataset.from_table_signature(client.address, "queue", 32, num_workers_per_iterator=1,
                                                 rate_limiter_timeout_ms=300).batch(16)

    @tf.function
    def sum_actions(ds):
        total = tf.constant(0, tf.int64)
        count = tf.constant(0, tf.int64)
        for batch in ds:
            total += tf.reduce_sum(batch.data["action"])
            count += tf.size(batch.data["action"], out_type=tf.int64)
        return total, count

    total, count = sum_actions(dataset)
    assert int(count) == 96 and int(total) == sum(range(96))


def test_a_single_server_going_away_fails_the_dataset_with_a_clear_error(start_server, helpers):
    server = start_server([helpers.uniform_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "uniform", range(10))
    dataset = ReplayDataset.from_table_signature(client.address, "uniform", 8, num_workers_per_iterator=1)
    iterator = iter(dataset)
    next(iterator)
    server.stop(grace=0)
    with pytest.raises(tf.errors.OpError, match="unavailable|UnavailableError|CancelledError"):
        for _ in range(100_000):
            next(iterator)
    assert dataset.replay_metrics.failed_servers == [client.address]


def test_large_items_survive_deep_prefetching(start_server):
    # Items of 20 kB go through pooled block buffers that TensorFlow adopts without a copy: a
    # buffer must not be reused while any tensor in the pipeline still refers to it.
    signature = specs.TensorSpec((5000,), np.float32)
    server = start_server([Table.queue("large", 1000, signature=signature)])
    client = server.localhost_client()
    with client.trajectory_writer(1) as writer:
        for i in range(300):
            writer.create_item("large", 1.0, writer.append(np.full(5000, i, np.float32)))
        writer.flush()
    dataset = ReplayDataset.from_table_signature(client.address, "large", 64, num_workers_per_iterator=1,
                                                 rate_limiter_timeout_ms=300).prefetch(1000)
    iterator = iter(dataset)
    first = next(iterator).data.numpy()
    deadline = time.monotonic() + 30
    while client.server_info()["large"].current_size and time.monotonic() < deadline:
        time.sleep(0.05)  # let the pipeline read everything ahead into its prefetch buffer
    rest = [e.data.numpy() for e in iterator]
    values = [first] + rest
    assert len(values) == 300
    for i, value in enumerate(values):
        assert value.min() == value.max() == i


def test_a_small_max_message_bytes_gets_responses_it_accepts(start_server):
    # The server's own responses run to megabytes; a dataset that accepts less says so in its
    # request, and the server keeps each response well under it instead of failing the stream.
    signature = specs.TensorSpec((10_000,), np.float32)
    server = start_server([Table.queue("large", 1000, signature=signature)])
    client = server.localhost_client()
    steps = np.random.default_rng(0).random((200, 10_000), dtype=np.float32)  # incompressible
    steps[:, 0] = np.arange(200)
    with client.trajectory_writer(1) as writer:
        for step in steps:  # 8 MB of 40 kB items
            writer.create_item("large", 1.0, writer.append(step))
        writer.flush()
    with ReplayDataset.from_table_signature(client.address, "large", 200, num_workers_per_iterator=1,
                                            rate_limiter_timeout_ms=300,
                                            max_message_bytes=1 << 20) as dataset:
        values = np.stack([e.data.numpy() for e in dataset])
        np.testing.assert_array_equal(values, steps)
        blocks = dataset.metrics.snapshot()[client.address].blocks
    assert blocks >= 200 * 40_000 // (1 << 20)  # no response over the limit


def test_block_pool_reuses_a_buffer_only_once_nothing_else_refers_to_it():
    pool = BlockPool()
    float32 = np.dtype(np.float32)
    first = pool.get((10, 5000), float32)
    assert first.ctypes.data % 64 == 0
    first[:] = 1.0
    second = pool.get((10, 5000), float32)
    assert not np.shares_memory(first, second)
    address = first.ctypes.data
    del first
    third = pool.get((9, 5000), float32)  # a smaller block fits the freed buffer
    assert third.ctypes.data == address and third.shape == (9, 5000)

    def blocks():
        yield third  # noqa: F821 - deleted only after the generator ran

    # A tf.data generator's aligned array becomes the tensor's memory (no copy) ...
    adopted = next(iter(tf.data.Dataset.from_generator(
        blocks, output_signature=tf.TensorSpec([9, 5000], tf.float32))))
    del third
    before = adopted.numpy()[0, :3].copy()
    # ... so the buffer stays taken while the tensor lives.
    fourth = pool.get((10, 5000), float32)
    assert fourth.ctypes.data != address
    fourth[:] = 2.0
    np.testing.assert_array_equal(adopted.numpy()[0, :3], before)
    np.testing.assert_array_equal(before, [1.0, 1.0, 1.0])


def test_closing_ends_a_read_waiting_on_a_server_that_keeps_running(start_server, helpers):
    """A learner that closes its dataset while the server stays up (an external replay server)
    must not stay blocked on a table that gets no more items (it used to hang for good, also in
    the iterator's destructor)."""
    import threading

    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(2))
    dataset = ReplayDataset.from_table_signature(client.address, "queue", 4, num_workers_per_iterator=1)
    iterator = iter(dataset)
    assert [int(next(iterator).data["action"]) for _ in range(2)] == [0, 1]
    ended = []

    def read_on():  # blocks: the queue is empty and the server keeps running
        try:
            next(iterator)
            ended.append("an element")
        except StopIteration:
            ended.append("the end")

    reader = threading.Thread(target=read_on, daemon=True)
    reader.start()
    reader.join(timeout=1.0)
    assert reader.is_alive() and not ended  # still waiting for an item
    dataset.replay_close()
    reader.join(timeout=30)
    assert ended == ["the end"]


def test_batch_cuts_consecutive_samples_across_blocks_as_tf_data_batch_does(start_server, helpers):
    """`ReplayDataset.batch` rebatches the received blocks (of up to 7 samples here) instead of
    unbatching them: the batches, their order, the last partial batch and the element spec
    must be those of a plain `batch` over the samples."""
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(50))

    def dataset():
        return ReplayDataset.from_table_signature(
            client.address, "queue", max_in_flight_samples_per_worker=7, num_workers_per_iterator=1,
            rate_limiter_timeout_ms=300)

    batched = dataset().batch(8)
    plain = tf.data.Dataset.batch(dataset(), 8)  # the generic tf.data batch, for the spec
    assert batched.element_spec == plain.element_spec
    batches = [b.data["action"].tolist() for b in _all_elements(batched)]
    assert batches == [list(range(i, min(i + 8, 50))) for i in range(0, 50, 8)]

    helpers.write_steps(client, "queue", range(50, 70))
    exact = dataset().batch(8, drop_remainder=True)
    assert exact.element_spec.data["action"].shape == (8,)
    assert [b.data["action"].tolist() for b in _all_elements(exact)] == [
        list(range(50, 58)), list(range(58, 66))]
