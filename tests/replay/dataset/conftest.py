"""Fixtures of the ReplayDataset tests: real replay servers on loopback (stopped at teardown)
and `helpers`: table factories, test steps whose leaves encode their index, and item writing."""
import types

import numpy as np
import pytest

from replay import rate_limiters, selectors, specs
from replay.server import Server
from replay.table import Table

STEP_SIGNATURE = {
    "observation": specs.TensorSpec((3,), np.float32),
    "action": specs.TensorSpec((), np.int64),
    "flags": {"done": specs.TensorSpec((), np.bool_), "frame": specs.TensorSpec((2, 2), np.uint8)},
}


def make_step(i: int) -> dict:
    """A step whose every leaf encodes its index `i`, so tests can check content and order."""
    return {
        "observation": np.array([i, i + 0.5, -i], np.float32),
        "action": np.int64(i),
        "flags": {"done": np.bool_(i % 2), "frame": np.full((2, 2), i % 251, np.uint8)},
    }


def queue_table(name="queue", max_size=10_000, signature=STEP_SIGNATURE):
    return Table(name, selectors.Fifo(), selectors.Fifo(), max_size, rate_limiters.MinSize(1),
                 max_times_sampled=1, signature=signature)


def uniform_table(name="uniform", max_size=10_000, signature=STEP_SIGNATURE, priority_exponent=None):
    sampler = (selectors.Uniform(seed=0) if priority_exponent is None
               else selectors.Prioritized(priority_exponent, seed=0))
    return Table(name, sampler, selectors.Fifo(), max_size, rate_limiters.MinSize(1),
                 signature=signature)


def write_steps(client, table, indices, priority=1.0):
    """One single-step item per index; returns when the server acked them all."""
    with client.trajectory_writer(1) as writer:
        for i in indices:
            writer.create_item(table, priority, writer.append(make_step(i)))
        writer.flush()


@pytest.fixture
def start_server(free_port):
    """Starts a Server with the given tables (the first on the `free_port`); stops them all."""
    servers = []

    def start(tables, port=None):
        server = Server(tables, port=port if port is not None else (None if servers else free_port))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace=0)


@pytest.fixture
def helpers():
    return types.SimpleNamespace(STEP_SIGNATURE=STEP_SIGNATURE, make_step=make_step, queue_table=queue_table,
                                 uniform_table=uniform_table, write_steps=write_steps)
