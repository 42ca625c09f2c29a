"""`replay.Client` is Reverb 0.14's `Client` (one class under both names), over a real server."""
import pickle

import numpy as np
import pytest

import replay
import replay.reverb as reverb
from replay import errors, rate_limiters, selectors
from replay.server import Server
from replay.specs import TensorSpec
from replay.table import Table
from replay.trajectory_writer import TrajectoryWriter

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server():
    tables = [
        Table("fifo", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1)),
        Table("signed", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
              signature={"x": TensorSpec((None, 2), np.float32), "n": TensorSpec((None,), np.int64)}),
    ]
    srv = Server(tables)
    yield srv
    srv.stop(grace=None)


def test_one_client_class_with_reverb_construction_repr_and_pickling(server):
    assert replay.Client is reverb.Client is reverb.client.Client
    client = replay.Client(f"localhost:{server.port}")
    assert repr(client) == f"Client, server_address=localhost:{server.port}"
    assert pickle.loads(pickle.dumps(client)).server_address == client.server_address
    for several in (["localhost:1", "localhost:2"], "localhost:1,localhost:2"):
        with pytest.raises(errors.InvalidArgumentError, match="replay.connect"):
            replay.Client(several)


def _write(client, steps, chunk_length=None):
    """Items of 3 steps of x (float32 [2]) and n (int64) from a writer of `chunk_length`."""
    writer = TrajectoryWriter(client, 3, chunk_length=chunk_length)
    for t in range(steps):
        writer.append({"x": np.full(2, t, np.float32), "n": np.int64(t)})
        if t >= 2:
            writer.create_item("signed", 1.0, {"x": writer.history["x"][-3:], "n": writer.history["n"][-3:]})
    writer.flush(timeout_ms=10_000)
    writer.close()


@pytest.mark.parametrize("chunk_length", [None, 2], ids=["columnar responses", "items over two chunks"])
def test_sample_splits_items_into_timesteps_or_gives_them_whole(server, chunk_length):
    client = server.localhost_client()
    _write(client, 5, chunk_length)
    steps = next(client.sample("signed", 1))  # Reverb's default: emit_timesteps
    assert [s.data for s in steps][0][0].shape == () and len(steps) == 3  # flat, keys sorted: n, x
    assert [int(s.data[0]) for s in steps] == [0, 1, 2]
    assert all(s.info == steps[0].info and isinstance(s.info.key, int) for s in steps)
    np.testing.assert_array_equal(steps[2].data[1], [2.0, 2.0])
    whole = list(client.sample("signed", 2, emit_timesteps=False, unpack_as_table_signature=True))
    assert [w.data["n"].tolist() for w in whole] == [[0, 1, 2], [0, 1, 2]]  # Fifo: the oldest item
    assert whole[0].data["x"].shape == (3, 2) and whole[0].data["x"].dtype == np.float32
    whole[0].data["x"][0, 0] = 7.0  # samples own writable data, as Reverb's
    [step] = next(client.sample("signed", 1, unpack_as_table_signature=True))[-1:]
    assert step.data["n"].shape == () and int(step.data["n"]) == 2


def test_sample_errors_are_reverbs_and_raised_when_iterated(server):
    client = server.localhost_client()
    generator = client.sample("nope", 1, unpack_as_table_signature=True)  # nothing happens yet
    with pytest.raises(ValueError, match='Could not find table "nope"'):
        next(generator)
    with pytest.raises(errors.NotFoundError):
        next(client.sample("nope", 1, timeout=5))
    with pytest.raises(ValueError):
        next(client.sample("fifo", 0))
    writer = TrajectoryWriter(client, 1)
    writer.append({"x": np.zeros(2, np.float32), "s": np.str_("text")})
    # squeezed columns: no time dimension
    writer.create_item("fifo", 1.0, {"x": writer.history["x"][-1], "s": writer.history["s"][-1]})
    writer.flush(timeout_ms=10_000)
    with pytest.raises(errors.InvalidArgumentError, match="Can't split non timestep trajectory"):
        next(client.sample("fifo", 1, timeout=5))
    sample = next(client.sample("fifo", 1, emit_timesteps=False, timeout=5))
    assert sample.data[0] == b"text"  # str leaves come back as bytes (tf.string), as in Reverb


def test_insert_gives_items_a_time_dimension_of_one_step(server):
    client = server.localhost_client()
    client.insert({"x": np.ones(2, np.float32), "n": np.int64(4)}, {"signed": 1.0, "fifo": 2.0})
    whole = next(client.sample("signed", 1, emit_timesteps=False, unpack_as_table_signature=True))
    assert whole.data["x"].shape == (1, 2) and whole.data["n"].tolist() == [4]
    [step] = next(client.sample("fifo", 1))
    assert step.info.priority == 2.0 and int(step.data[0]) == 4
    with pytest.raises(ValueError, match="at least one"):
        client.insert(np.int64(1), {})


def test_server_info_is_reverbs_table_info(server):
    import tensorflow as tf

    client = server.localhost_client()
    _write(client, 4)
    info = client.server_info()["signed"]
    assert isinstance(info, reverb.TableInfo)
    assert (info.current_size, info.num_episodes, info.max_size, info.num_inserts) == (2, 1, 100, 2)
    assert info.signature == {"x": tf.TensorSpec([None, 2], tf.float32), "n": tf.TensorSpec([None], tf.int64)}
    assert info.sampler_options.fifo and info.sampler_options["kind"] == "Fifo"
    assert info.rate_limiter_info.insert_stats.completed == 2 and info.rate_limiter_info.min_size_to_sample == 1


def test_server_info_waits_for_a_server_until_its_timeout(free_port):
    port = free_port
    client = replay.Client(f"localhost:{port}")
    with pytest.raises(errors.ServerUnreachableError, match="within provided timeout of 0.3s") as caught:
        client.server_info(timeout=0.3)
    # Reverb's error, and the one callers that try another server catch.
    assert isinstance(caught.value, errors.DeadlineExceededError)
    assert isinstance(caught.value, errors.UnavailableError)
    with pytest.raises(errors.UnavailableError):
        client.server_info()
