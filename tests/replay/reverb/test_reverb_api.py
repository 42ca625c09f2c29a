"""replay.reverb, Reverb's Python API, against a real server on loopback."""
import pickle

import numpy as np
import pytest
import tensorflow as tf

import replay
import replay.reverb as reverb


@pytest.fixture
def server():
    tables = [
        reverb.Table(name="prio", sampler=reverb.selectors.Prioritized(1.0), remover=reverb.selectors.Fifo(),
                     max_size=100, rate_limiter=reverb.rate_limiters.MinSize(1)),
        reverb.Table.queue("queue", 10, signature={"a": tf.TensorSpec([3], tf.int64)}),
    ]
    srv = reverb.Server(tables=tables)
    yield srv
    srv.stop()


def test_table_info_is_a_property_with_reverb_fields_and_the_native_call_still_works():
    table = reverb.Table(name="t", sampler=reverb.selectors.Uniform(), remover=reverb.selectors.Fifo(),
                         max_size=7, rate_limiter=reverb.rate_limiters.MinSize(2))
    info = table.info
    assert (info.name, info.max_size, info.current_size, info.num_episodes, info.num_unique_samples) == \
        ("t", 7, 0, 0, 0)
    assert info.sampler_options.uniform and not info.sampler_options.fifo and info.remover_options.fifo
    assert info.rate_limiter_info.min_size_to_sample == 2 and info.rate_limiter_info.sample_stats.completed == 0
    assert table.info().size == 0  # the call form still works
    native = replay.Table("n", replay.Fifo(), replay.Fifo(), 3, replay.MinSize(1))
    assert native.info.current_size == native.info().size == 0
    # One TableInfo: the service's table, its client and replay.reverb all give replay.TableInfo.
    assert type(native.info) is type(info) is reverb.TableInfo is replay.TableInfo
    assert native.info.sampler_options == {"kind": "Fifo"} and native.info.sampler_options.fifo
    replaced = table.replace(rate_limiter=reverb.rate_limiters.MinSize(1))
    assert replaced.info.rate_limiter_info.min_size_to_sample == 1 and replaced.info.max_size == 7


def test_server_validates_like_reverb():
    with pytest.raises(ValueError, match="at least one table"):
        reverb.Server(tables=[])
    with pytest.raises(ValueError, match="above"):
        reverb.rate_limiters.SampleToInsertRatio(1, 10, (11, 15))


def test_insert_sample_emits_timesteps_and_server_info(server):
    client = server.localhost_client()
    client.insert(np.int64(5), {"prio": 2.0})
    assert not server.tables["queue"].can_sample(1) and server.tables["prio"].can_sample(1)
    [steps] = list(client.sample("prio", 1))
    assert len(steps) == 1 and int(steps[0].data[0]) == 5 and steps[0].info.priority == 2.0
    whole = next(client.sample("prio", emit_timesteps=False))
    assert whole.data[0].tolist() == [5]  # the item has a time dimension of one step, as in Reverb
    info = client.server_info()["prio"]
    assert info.current_size == 1 and info.num_unique_samples == 1
    assert info.sampler_options.prioritized.priority_exponent == 1.0
    assert info.rate_limiter_info.sample_stats.completed == 2
    assert pickle.loads(pickle.dumps(client)).server_address == client.server_address


def test_trajectory_writer_columns_squeeze_missing_leaves_and_unpack_as_signature(server):
    client = server.localhost_client()
    with client.trajectory_writer(3) as writer:
        for i in range(3):
            writer.append({"a": np.int64(i), "b": None if i == 1 else np.float32(i)})
        column = writer.history["a"][:]
        assert column.dtype == np.int64 and column.shape == (3,)
        np.testing.assert_array_equal(column.numpy(), [0, 1, 2])
        assert writer.history["a"][-1].numpy() == 2
        with pytest.raises(ValueError, match="None"):
            reverb.TrajectoryColumn(list(writer.history["b"]))
        writer.create_item("queue", 1.0, {"a": column})
    sample = next(client.sample("queue", emit_timesteps=False, unpack_as_table_signature=True))
    np.testing.assert_array_equal(sample.data["a"], [0, 1, 2])


def test_trajectory_writer_takes_a_first_step_in_parts_and_names_bad_columns_as_reverb(server):
    client = server.localhost_client()
    with client.trajectory_writer(2) as writer:
        writer.append({"x": np.int64(3)}, partial_step=True)
        assert writer.episode_steps == 0
        writer.append({"y": {"z": np.zeros(2, np.float32)}})
        assert writer.episode_steps == 1
        with pytest.raises(ValueError, match=r"wrong dtype provided for column \('x',\)\. "
                                             r"Got double but expected int64\."):
            writer.append({"x": 1.0, "y": {"z": np.zeros(2, np.float32)}})
        with pytest.raises(ValueError, match=r"incompatible shape provided for column \('y', 'z'\)\. "
                                             r"Got \[1,2\] which is incompatible with \[2\]\."):
            writer.append({"x": np.int64(4), "y": {"z": np.zeros((1, 2), np.float32)}})
        with pytest.raises(ValueError, match="cannot contain any None"):
            reverb.TrajectoryColumn([None])
        writer.append({"x": np.int64(4), "y": {"z": np.ones(2, np.float32)}})
        assert writer.episode_steps == 2  # the refused steps wrote nothing
        writer.create_item("prio", 1.0, {"x": writer.history["x"][:], "z": writer.history["y"]["z"][-1]})
        writer.end_episode()
        assert writer.episode_steps == 0
    sample = next(client.sample("prio", emit_timesteps=False))
    np.testing.assert_array_equal(sample.data[0], [3, 4])
    np.testing.assert_array_equal(sample.data[1], [1, 1])


def test_trajectory_writer_keeps_its_history_over_end_episode_without_clearing_buffers(server):
    client = server.localhost_client()
    with client.trajectory_writer(2) as writer:
        writer.append([np.int64([1, 2, 3])])
        writer.end_episode(clear_buffers=False)
        kept = writer.history[0][-1]
        np.testing.assert_array_equal(kept.numpy(), [1, 2, 3])
        writer.create_item("queue", 1.0, kept)  # a step of the ended episode
        writer.append([np.int64([4, 5, 6])])
        writer.create_item("queue", 1.0, writer.history[0][-1])
        writer.end_episode()
        assert len(writer.history[0]) == 0
        with pytest.raises(RuntimeError, match="expired"):
            kept.numpy()
    values = [next(client.sample("queue", emit_timesteps=False)).data[0].tolist() for _ in range(2)]
    assert values == [[1, 2, 3], [4, 5, 6]]


def test_history_slices_without_start_take_the_kept_steps_before_stop(server):
    """As Reverb's _ColumnHistory: a slice with only a stop (and maybe a step) takes the kept
    steps before it, without None references for steps no longer kept; [:0] is empty, and a stop
    at or past the end takes every kept step (Reverb's arithmetic there is a divergence kept on
    purpose, tools/reverb_diff/divergences.py history_index_at_length)."""
    with server.localhost_client().trajectory_writer(num_keep_alive_refs=3) as writer:
        for i in range(4):
            writer.append({"a": np.int64(i)})
        column = writer.history["a"]
        def steps(c):
            return [ref.value.item() for ref in c]
        assert steps(column[:3]) == [1, 2] and steps(column[:3:1]) == [1, 2] and steps(column[:-1:2]) == [1]
        assert steps(column[:4]) == steps(column[:9]) == [1, 2, 3]
        assert len(column[:0]) == 0
        with pytest.raises(ValueError, match="cannot be empty|must not be empty"):
            writer.create_item("prio", 1.0, {"a": column[:0]})


def test_a_trajectory_writer_dropped_without_close_sends_its_items_first(server):
    client = server.localhost_client()
    writer = client.trajectory_writer(1)
    writer.append([np.int64([7, 8, 9])])
    writer.create_item("queue", 1.0, writer.history[0][-1])
    del writer  # as with Reverb's writer: the item is in the table once the writer is gone
    assert client.server_info()["queue"].current_size == 1
    assert next(client.sample("queue", emit_timesteps=False)).data[0].tolist() == [7, 8, 9]


def test_a_dropped_writer_that_a_rate_limiter_holds_back_does_not_hold_the_collector():
    # Its finalizer runs in whichever thread's garbage collection finds it; waiting there for
    # acks that only a sampler can bring held that thread for 35 s. The stream is cancelled
    # once the server reports the wait: the admitted items stay, the others never go in.
    import gc
    import time

    limiter = reverb.rate_limiters.SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=1,
                                                       error_buffer=2.0)
    with reverb.Server([reverb.Table("held", reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                                     100, limiter)]) as held_server:
        client = held_server.localhost_client()
        writer = client.trajectory_writer(1)
        for i in range(20):
            writer.append(np.int64(i))
            writer.create_item("held", 1.0, writer.history[-1])
        cycle = [writer]
        cycle.append(cycle)  # left to the cyclic collector, as most dropped objects are
        del writer, cycle
        start = time.monotonic()
        gc.collect()
        assert time.monotonic() - start < 10.0
        admitted = client.server_info()["held"].current_size
        assert 1 <= admitted < 20
        sampled = [next(client.sample("held", emit_timesteps=False)).data[0].item() for _ in range(2)]
        assert set(sampled) <= set(range(admitted))  # the first items, in order
        time.sleep(0.5)  # the samples made room, but nothing of the cancelled stream comes
        assert client.server_info()["held"].current_size == admitted


def test_server_info_with_timeout_and_no_server_is_deadline_exceeded(free_port):
    client = reverb.Client(f"localhost:{free_port}")
    with pytest.raises(reverb.errors.DeadlineExceededError, match="within provided timeout"):
        client.server_info(timeout=0.3)


def test_timestep_dataset_splits_items_into_steps(server):
    client = server.localhost_client()
    with client.writer(3) as writer:
        for i in range(3):
            writer.append(np.int64(i))
        writer.create_item("prio", 3, 1.0)
    ds = reverb.TimestepDataset(server.address, "prio", dtypes={"x": tf.int64}, shapes={"x": tf.TensorShape([])},
                                max_in_flight_samples_per_worker=1, max_samples=1)
    steps = [int(s.data["x"]) for s in ds]
    ds.close()
    assert steps == [0, 1, 2]


def test_tf_client_ops_in_a_tf_function(server):
    tf_client = reverb.TFClient(server.address)

    @tf.function
    def insert_then_sample():
        with tf.control_dependencies([tf_client.insert([tf.constant(7, tf.int64)], tf.constant(["prio"]),
                                                       tf.constant([1.0], tf.float64))]):
            sample = tf_client.sample("prio", [tf.int64])
        with tf.control_dependencies([tf_client.update_priorities(
                "prio", tf.reshape(sample.info.key, [1]), tf.constant([4.0], tf.float64))]):
            return sample.info.key, sample.data[0]

    key, value = insert_then_sample()
    assert int(value) == 7
    assert server.tables["prio"].get(int(key)).priority == 4.0


def test_tf_client_sample_op_refuses_another_dtype_and_keeps_the_servers_error_code(server):
    """As Reverb's op: a column of another dtype than asked is an InternalError (never a silent
    cast), and the server's NotFound stays NotFound: eagerly, in a tf.function and in a TF1
    session (where TensorFlow would turn a Python function's error into UnknownError)."""
    server.localhost_client().insert(np.zeros(3, np.float64), {"prio": 1.0})
    tf_client = reverb.TFClient(server.address)
    with pytest.raises(tf.errors.InternalError, match="dtype float64, but data_dtypes gives float"):
        tf_client.sample("prio", [tf.float32])
    with pytest.raises(tf.errors.NotFoundError, match="missing"):
        tf_client.sample("missing", [tf.float64])
    with pytest.raises(tf.errors.InternalError, match="dtype float64, but data_dtypes gives float"):
        tf.function(lambda: tf_client.sample("prio", [tf.float32]).data[0])()
    with pytest.raises(tf.errors.NotFoundError, match="missing"):
        tf.function(lambda: tf_client.sample("missing", [tf.float64]).data[0])()

    @tf.function
    def update_with_one_priority_for_two_keys():
        tf_client.update_priorities("prio", tf.constant([1, 2], tf.uint64), tf.constant([1.0], tf.float64))

    with pytest.raises(tf.errors.InvalidArgumentError, match="same length"):
        update_with_one_priority_for_two_keys()
    assert tf_client.sample("prio", [tf.float64]).data[0].numpy().tolist() == [0.0, 0.0, 0.0]

    graph = tf.Graph()
    with graph.as_default():
        missing = reverb.TFClient(server.address).sample("missing", [tf.float64])
        found = reverb.TFClient(server.address).sample("prio", [tf.float64])
        with tf.compat.v1.Session(graph=graph) as session:
            with pytest.raises(tf.errors.NotFoundError, match="missing"):
                session.run(missing.data)
            assert session.run(found.data)[0].tolist() == [0.0, 0.0, 0.0]


def test_checkpointer_wrapper_restores_tables(tmp_path):
    def tables():
        return [reverb.Table.queue("q", 10)]

    srv = reverb.Server(tables=tables(), checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)))
    client = srv.localhost_client()
    client.insert(np.int64(3), {"q": 1.0})
    client.checkpoint()
    srv.stop()
    srv = reverb.Server(tables=tables(), checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)))
    try:
        assert srv.localhost_client().server_info()["q"].current_size == 1
    finally:
        srv.stop()


def test_strings_are_sampled_as_bytes_as_reverb_gives_tf_string(server):
    """Reverb stores a string as tf.string and samples it as bytes, whatever its length; a str
    written through replay.reverb comes back UTF-8 encoded, step by step or whole."""
    client = server.localhost_client()
    words = ["kort", "a good deal longer", "ünïcode"]
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for word in words:
            writer.append([np.str_(word)])
            writer.create_item("prio", 1.0, writer.history[0][-1:])
    sampled = set()
    for steps in client.sample("prio", 60):
        assert steps[0].data[0].dtype.kind == "S"
        sampled.add(bytes(steps[0].data[0]))
    assert sampled == {w.encode("utf-8") for w in words}
    whole = next(client.sample("prio", emit_timesteps=False))
    assert whole.data[0].dtype.kind == "S" and bytes(whole.data[0][0]).decode("utf-8") in words
