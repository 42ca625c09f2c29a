"""ReplayShards: replay servers the trainer starts in their own processes (Ray actors), or
external servers, all serving the same tables."""
import time

import numpy as np
import pytest

from replay import errors as replay_errors
from replay.server import Server
from replay.specs import TensorSpec
from replay.table import Table
from tfrl.errors import InvalidConfigError
from tfrl.replay_hosting import ReplayShards

pytestmark = pytest.mark.timeout(120)
SIGNATURE = {"x": TensorSpec((2,), np.float32, "x")}


def table(name="replay"):
    return Table.queue(name, 100, signature=SIGNATURE)


def test_started_shards_are_separate_servers_and_stop_with_the_trainer(ray_session):
    shards = ReplayShards(num_shards=2)
    shards.add_table(table())
    addresses = shards.start()
    try:
        assert len(set(addresses)) == 2
        shards.client(0).insert({"x": np.ones(2, np.float32)}, {"replay": 1.0})
        sizes = [shards.client(i).server_info()["replay"].current_size for i in range(2)]
        assert sizes == [1, 0]  # one buffer per shard, not one shared
        with pytest.raises(InvalidConfigError, match="after the replay shards started"):
            shards.add_table(table("late"))
        # each shard's process is its own, so it keeps the collector off its stored items
        import ray

        from replay import gc_freeze

        thresholds = ray.get([actor.__ray_call__.remote(lambda _: __import__("gc").get_threshold())
                              for actor in shards._actors])
        assert thresholds == [gc_freeze._THRESHOLDS] * 2
    finally:
        shards.stop()
    from replay import Client

    with pytest.raises(replay_errors.ReplayError):
        Client(addresses[0]).server_info(timeout=5)


def test_external_shards_must_serve_the_declared_tables():
    server = Server([table("other")], port=None)
    try:
        shards = ReplayShards(addresses=[f"127.0.0.1:{server.port}"])
        shards.add_table(table())
        with pytest.raises(InvalidConfigError, match=r"shard 0 .* has no table\(s\) \['replay'\]"):
            shards.start()
        shards.stop()
    finally:
        server.stop()
    with pytest.raises(InvalidConfigError, match="replay_shard_addresses is empty"):
        ReplayShards(addresses=[])


def test_a_shard_whose_server_is_gone_is_found_dead_at_once_and_a_live_one_alive():
    servers = [Server([table()], port=None) for _ in range(2)]
    try:
        shards = ReplayShards(addresses=[f"127.0.0.1:{server.port}" for server in servers])
        shards.add_table(table())
        shards.start()
        assert shards.alive(0) and shards.alive(1)
        servers[1].stop()
        started = time.monotonic()
        assert not shards.alive(1, timeout=5.0)
        # nothing listens on its port: no waiting out the timeout as server_info's retries do
        assert time.monotonic() - started < 2.0
        assert shards.alive(0)
        shards.stop()
    finally:
        for server in servers:
            server.stop()
