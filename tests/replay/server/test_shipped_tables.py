"""The README's client example, against `replay-server --config examples/replay_tables.yaml`."""
import os

import numpy as np

import replay
from tests.replay.server.conftest import REPO_ROOT


def test_readme_client_example_runs_against_the_shipped_tables(server_process_factory):
    server = server_process_factory(os.path.join(REPO_ROOT, "examples", "replay_tables.yaml"))
    client = replay.Client(server.address)
    with client.writer(max_sequence_length=3) as writer:
        for step in range(10):
            writer.append({"obs": np.zeros(4, np.float32), "action": np.int64(step % 2)})
            if step >= 2:
                writer.create_item("trajectories", num_timesteps=3, priority=1.0)
    samples = list(client.sample("trajectories", num_samples=2, emit_timesteps=False, unpack_as_table_signature=True))
    assert [s.data["obs"].shape for s in samples] == [(3, 4), (3, 4)]
    client.mutate_priorities("trajectories", updates={samples[-1].info.key: 5.0})
    info = client.server_info()
    assert info["trajectories"].current_size == 8
    assert {"replay", "rollouts"} <= set(info)  # the trainers' tables

    with replay.ReplayDataset.from_table_signature(
            server.address, "trajectories", max_in_flight_samples_per_worker=64) as dataset:
        batches = list(dataset.batch(32).take(10))
    assert dataset.closed and len(batches) == 10
    assert all(b.data["obs"].shape == (32, 3, 4) and b.data["action"].shape == (32, 3) for b in batches)
    assert dataset.metrics.total_samples >= 320
    client.close()


def test_the_readme_example_runs_as_written(server_process_factory, capsys):
    """The README's "Run a replay server" example, as printed there, against the same server."""
    import re

    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("## Run a replay server"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert code.count('"localhost:8000"') == 2
    server = server_process_factory(os.path.join(REPO_ROOT, "examples", "replay_tables.yaml"))
    namespace = {}
    exec(compile(code.replace('"localhost:8000"', repr(server.address)), "README.md", "exec"),
         namespace)
    namespace["client"].close()
    printed = capsys.readouterr().out.split("\n")
    assert printed[2:12] == ["(32, 3, 4)"] * 10 and int(printed[12]) >= 320
