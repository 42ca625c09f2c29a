"""Writers read the tables' signatures from their insert stream's first response, not through a
ServerInfo call of their own: hundreds of writers starting at once would otherwise queue that
many ServerInfo calls, which the server takes up one at a time, ahead of everyone else's."""
import threading
import time

import numpy as np
import pytest

from replay import errors, rate_limiters, selectors, specs
from replay.client import Client
from replay.server import Server
from replay.table import Table

pytestmark = pytest.mark.timeout(120)


def _signed_table(name="signed"):
    return Table(name, selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                 signature={"a": specs.TensorSpec([], np.int64)})


def test_items_are_checked_against_the_signatures_the_insert_stream_was_told_of():
    with Server([_signed_table(), Table.queue("free", 10)]) as server:
        client = Client(f"localhost:{server.port}")
        with client.trajectory_writer(num_keep_alive_refs=2) as writer:
            writer.append({"a": np.int64(7)})
            with pytest.raises(errors.SignatureMismatchError, match="signed"):
                writer.create_item("signed", 1.0, {"a": writer.history["a"][-1:]})
            writer.create_item("signed", 1.0, {"a": writer.history["a"][-1]})
            # the client never asked server_info: it would have cached the signatures it read
            assert client._signatures == {}  # noqa: SLF001
            # a table the stream was not told of is looked up afresh, then refused
            with pytest.raises(errors.InvalidArgumentError, match="could not be found"):
                writer.create_item("nowhere", 1.0, {"a": writer.history["a"][-1]})
            writer.flush()
        sample = next(client.sample("signed", 1, emit_timesteps=False))
        assert int(sample.data[0]) == 7
        assert client.server_info()["signed"].num_inserts == 1


def test_a_writer_whose_server_comes_up_later_waits_for_it_and_loses_nothing(free_port):
    address = f"localhost:{free_port}"
    client = Client(address)
    writer = client.trajectory_writer(num_keep_alive_refs=1, get_signature_timeout_ms=30_000)
    writer.append({"a": np.int64(3)})
    servers = []
    starter = threading.Timer(1.0, lambda: servers.append(Server([_signed_table()], port=free_port)))
    starter.start()
    try:
        started = time.monotonic()
        writer.create_item("signed", 1.0, {"a": writer.history["a"][-1]})
        assert time.monotonic() - started >= 0.5  # it waited for the server
        writer.flush(timeout_ms=10_000)
        writer.close()
        assert client.server_info(timeout=5)["signed"].num_inserts == 1
    finally:
        starter.join()
        for server in servers:
            server.stop()


def test_a_signature_timeout_raises_deadline_exceeded_as_server_info_does(free_port):
    client = Client(f"localhost:{free_port}")  # nobody listens there
    writer = client.trajectory_writer(num_keep_alive_refs=1, get_signature_timeout_ms=300)
    writer.append({"a": np.int64(1)})
    started = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="ServerInfo call did not complete"):
        writer.create_item("signed", 1.0, {"a": writer.history["a"][-1]})
    assert time.monotonic() - started < 5.0
