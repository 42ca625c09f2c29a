"""Sharding over 3 replay server processes: round robin by episode, merged dataset streams,
and one server killed (SIGKILL) while writing and reading go on with the other two."""
import os
import subprocess
import sys

import numpy as np
import pytest

from replay import errors
from replay.dataset import ReplayDataset
from replay.sharded_client import ShardedClient

pytestmark = pytest.mark.timeout(240)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

SERVER_PROGRAM = """
import sys
import numpy as np
from replay import rate_limiters, selectors, specs
from replay.server import Server
from replay.table import Table

signature = {"episode": specs.TensorSpec((), np.int64), "step": specs.TensorSpec((), np.int64)}
table = Table("shared", selectors.Uniform(seed=0), selectors.Fifo(), 100000, rate_limiters.MinSize(1),
              signature=signature)
server = Server([table])
print(server.port, flush=True)
sys.stdin.read()  # serve until the test closes stdin
server.stop(grace=0)
"""

STEPS_PER_EPISODE = 5


@pytest.fixture
def three_servers():
    processes = []
    for _ in range(3):
        processes.append(subprocess.Popen([sys.executable, "-c", SERVER_PROGRAM], cwd=REPO_ROOT,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    addresses = [f"127.0.0.1:{int(p.stdout.readline())}" for p in processes]
    yield processes, addresses
    for process in processes:
        if process.poll() is None:
            process.stdin.close()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _write_episodes(writer, episodes):
    created = 0
    for episode in episodes:
        for step in range(STEPS_PER_EPISODE):
            refs = writer.append({"episode": np.int64(episode), "step": np.int64(step)})
            created += writer.create_item("shared", 1.0, refs)
        writer.end_episode()
    return created


def _sizes(client):
    return {address: info["shared"].current_size for address, info in client.server_info().items()}


def test_three_servers_one_killed_writers_and_datasets_go_on(three_servers):
    processes, addresses = three_servers
    client = ShardedClient(addresses)
    writer = client.trajectory_writer(1)
    assert _write_episodes(writer, range(9)) == 9 * STEPS_PER_EPISODE
    # Round robin by episode: episode e went whole to server e % 3.
    assert _sizes(client) == {a: 3 * STEPS_PER_EPISODE for a in addresses}
    for index, address in enumerate(addresses):
        single = ShardedClient([address])
        episodes = {int(s.data["episode"]) for s in single.sample("shared", 30)}
        assert episodes == {e for e in range(9) if e % 3 == index}

    dataset = ReplayDataset.from_table_signature(addresses, "shared", max_in_flight_samples_per_worker=8,
                                                 num_workers_per_iterator=1)
    metrics = dataset.replay_metrics
    iterator = iter(dataset)
    servers_seen = set()
    for _ in range(3000):  # streams start at different moments; all three soon contribute
        servers_seen.add(int(next(iterator).data["episode"]) % 3)
        if len(servers_seen) == 3:
            break
    assert servers_seen == {0, 1, 2}  # the streams of all three servers are merged

    killed = addresses[1]
    processes[1].kill()
    processes[1].wait(10)

    # The dataset keeps reading from the two live servers; the killed one's stream ended.
    after = [int(next(iterator).data["episode"]) for _ in range(600)]
    assert len(after) == 600
    assert {e % 3 for e in after[-200:]} == {0, 2}
    assert metrics.failed_servers == [killed]
    assert metrics.snapshot()[killed].failures == 1

    # The writer moves on: the episodes meant for the killed server go to the others.
    created = _write_episodes(writer, range(9, 18))
    writer.close()
    assert client.dead_addresses == [killed]
    assert client.metrics.failures[killed] >= 1
    live_sizes = _sizes(client)
    assert set(live_sizes) == {addresses[0], addresses[2]}
    new_items = sum(live_sizes.values()) - 2 * 3 * STEPS_PER_EPISODE
    # Every item either reached a live server or is counted lost (unacknowledged by the dead
    # server, or dropped because its steps were written there).
    assert new_items + client.metrics.lost_items == 9 * STEPS_PER_EPISODE
    assert 1 <= client.metrics.lost_items <= STEPS_PER_EPISODE  # at most the episode in flight
    assert created <= 9 * STEPS_PER_EPISODE

    # Sampling and control calls skip the dead server too.
    assert len(list(client.sample("shared", 6))) == 6
    client.mutate_priorities("shared", updates={})


def test_every_server_dead_raises_unavailable(three_servers):
    processes, addresses = three_servers
    client = ShardedClient(addresses)
    for process in processes:
        process.kill()
        process.wait(10)
    with pytest.raises(errors.UnavailableError, match="every replay server"):
        client.insert({"episode": np.int64(0), "step": np.int64(0)}, {"shared": 1.0}, timeout=5)
    assert sorted(client.metrics.failures) == sorted(addresses)


def test_sharded_client_arguments():
    with pytest.raises(errors.InvalidArgumentError, match="at least one"):
        ShardedClient([])
    with pytest.raises(errors.InvalidArgumentError, match="distinct"):
        ShardedClient(["127.0.0.1:1", "127.0.0.1:1"])


def test_connect_picks_a_client_or_a_sharded_client_and_client_takes_one_address():
    import warnings

    import replay

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one address: a plain Client, no warning
        single = replay.connect("127.0.0.1:1", token="t")
        assert type(single) is replay.Client and single.address == "127.0.0.1:1"
        assert type(replay.Client("127.0.0.1:1")) is replay.Client
        sharded = replay.connect("127.0.0.1:1, 127.0.0.1:2", token="t")
    assert isinstance(sharded, replay.ShardedClient)
    assert sharded.addresses == ["127.0.0.1:1", "127.0.0.1:2"]
    assert all(c.metadata == single.metadata for c in sharded.clients.values())  # the token reached each
    assert isinstance(replay.connect(("127.0.0.1:1",)), replay.ShardedClient)
    with pytest.raises(errors.InvalidArgumentError, match="at least one"):
        replay.connect([])
    for several in (["127.0.0.1:1", "127.0.0.1:2"], "127.0.0.1:1,127.0.0.1:2"):
        with pytest.raises(errors.InvalidArgumentError, match="replay.connect"):
            replay.Client(several)
