"""The server's receive window: HTTP/2's fixed 64 KiB on loopback (the default there), gRPC's
probed window elsewhere. Either way, messages many times the window's size arrive whole."""
import numpy as np
import pytest

from replay import Client, rate_limiters, selectors
from replay.server import Server, _is_loopback
from replay.table import Table

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("LocalHost", True),
    ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("10.1.2.3", False), ("::", False),
    ("replay-node-3", False)])
def test_loopback_hosts_are_told_apart(host, loopback):
    assert _is_loopback(host) is loopback


def _table():
    return Table("window", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                 max_times_sampled=1)  # a queue: each item once, oldest first


@pytest.mark.parametrize("tune", [None, True, False])
def test_steps_far_larger_than_the_window_arrive_whole(tune):
    server = Server([_table()], tune_receive_window=tune)
    try:
        assert server.tune_receive_window is (tune if tune is not None else False)
        client = Client(f"localhost:{server.port}")
        rng = np.random.default_rng(5)
        steps = [rng.integers(0, 255, size=1 << 20, dtype=np.uint8) for _ in range(3)]
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for step in steps:
                writer.append({"frame": step})
                writer.create_item("window", 1.0, {"frame": writer.history["frame"][-1]})
            writer.flush(timeout_ms=30_000)
        assert client.server_info()["window"].current_size == len(steps)
        got = [sample.data[0] for sample in client.sample(
            "window", 3, timeout=30, emit_timesteps=False, unpack_as_table_signature=True)]
        for step, frame in zip(steps, got):
            np.testing.assert_array_equal(frame, step)
    finally:
        server.stop()
