"""Fixtures for the replay server tests: in-process servers and `replay-server` subprocesses."""
import os
import re
import signal
import subprocess
import sys
import textwrap

import grpc
import numpy as np
import pytest

from replay import protocol, rate_limiters, selectors
from replay.proto import replay_pb2_grpc
from replay.server import Server
from replay.table import Table

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def make_tables():
    return [
        Table("uniform", selectors.Uniform(seed=1), selectors.Fifo(), 1000, rate_limiters.MinSize(1)),
        Table("prioritized", selectors.Prioritized(1.0, seed=2), selectors.Fifo(), 1000, rate_limiters.MinSize(1)),
        Table.queue("queue", 100),
        Table("fifo_once", selectors.Fifo(), selectors.Fifo(), 100_000, rate_limiters.MinSize(1),
              max_times_sampled=1),
        Table("typed", selectors.Uniform(seed=3), selectors.Fifo(), 100, rate_limiters.MinSize(1),
              signature={"obs": _spec((3,), "float32"), "action": _spec((), "int64")}),
    ]


def _spec(shape, dtype):
    from replay.specs import TensorSpec

    return TensorSpec(shape, dtype)


@pytest.fixture
def server():
    """An in-process server with the tables of `make_tables`."""
    s = Server(make_tables())
    yield s
    s.stop(grace=None)


@pytest.fixture
def client(server):
    c = server.localhost_client()
    yield c
    c.close()


# Call metadata of a well-behaved client, for tests that speak raw gRPC.
GOOD_METADATA = ((protocol.PROTOCOL_METADATA_KEY, str(protocol.PROTOCOL_VERSION)),)


@pytest.fixture
def stub(server):
    """The generated gRPC stub on `server`, for requests no `Client` would send."""
    channel = grpc.insecure_channel(f"localhost:{server.port}")
    yield replay_pb2_grpc.ReplayServiceStub(channel)
    channel.close()


def fill_with_priorities(client, table, values):
    """One single-step float32 item per value, with the value as its priority."""
    with client.writer(1) as writer:
        for value in values:
            writer.append(np.float32(value))
            writer.create_item(table, 1, priority=float(value))


TABLES_YAML = textwrap.dedent("""\
    tables:
      - name: uniform
        sampler: {kind: Uniform}
        remover: {kind: Fifo}
        max_size: 1000
        rate_limiter: {kind: MinSize, min_size_to_sample: 1}
      - name: prioritized
        sampler: {kind: Prioritized, priority_exponent: 1.0}
        remover: {kind: Fifo}
        max_size: 1000
        rate_limiter: {kind: SampleToInsertRatio, samples_per_insert: 2.0, min_size_to_sample: 2,
                       error_buffer: 4}
      - {name: queue, kind: queue, max_size: 50}
    """)


class ServerProcess:
    """A `replay-server` subprocess; `.address` once it printed its address."""

    def __init__(self, config_path, *extra_args):
        env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "replay.server_main", "--config", str(config_path), *map(str, extra_args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
        self.lines = []
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            match = re.search(r"listening on ([\w.]+):(\d+)", line)
            if match:
                self.port = int(match.group(2))
                self.address = f"localhost:{self.port}"
                break
        else:
            raise RuntimeError(f"replay-server did not start: {self.proc.stderr.read()}")

    def read_until_exit(self, timeout=60):
        # Read through the same buffered stream the address was read from (communicate() would
        # miss lines already buffered there); the output is small, so the pipes cannot fill.
        self.proc.wait(timeout=timeout)
        self.lines.extend(self.proc.stdout.read().splitlines())
        return self.proc.returncode, self.proc.stderr.read()

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def tables_yaml(tmp_path):
    path = tmp_path / "tables.yaml"
    path.write_text(TABLES_YAML)
    return path


@pytest.fixture
def server_process_factory():
    started = []

    def start(config_path, *extra_args):
        process = ServerProcess(config_path, *extra_args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
