"""Fixtures of the learner tests: real replay servers on loopback, stopped at teardown."""
import pytest

from replay.server import Server


@pytest.fixture
def start_server(free_port):
    """Starts a Server with the given tables (the first on the `free_port`); stops them all."""
    servers = []

    def start(tables):
        server = Server(tables, port=None if servers else free_port)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace=0)
