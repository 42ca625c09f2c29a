"""Checkpoints: exact restore of items, priorities, times_sampled and counters; kill -9 and
restart; the rate-limiter restore rule; `replay-server` shutdown with a final checkpoint."""
import os
import signal

import pytest

from replay import errors, rate_limiters, selectors
from replay.checkpoint import Checkpointer
from replay.client import Client
from replay.server import Server
from replay.table import Table
from tests.replay.server.conftest import fill_with_priorities, make_tables

pytestmark = pytest.mark.timeout(180)


def test_checkpoint_restores_items_priorities_times_sampled_and_counters(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(make_tables(), checkpointer=checkpointer) as server:
        client = server.localhost_client()
        fill_with_priorities(client, "prioritized", range(1, 11))
        fill_with_priorities(client, "queue", range(5))
        list(client.sample("prioritized", 7, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
        list(client.sample("queue", 2, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
        keys = server.tables["prioritized"].keys()
        client.mutate_priorities("prioritized", updates={keys[0]: 42.0}, deletes=[keys[1]])
        before = {k: (server.tables["prioritized"].get(k).priority, server.tables["prioritized"].get(k).times_sampled)
                  for k in server.tables["prioritized"].keys()}
        queue_keys = server.tables["queue"].keys()
        info_before = client.server_info()
        path = client.checkpoint()
        assert os.path.exists(os.path.join(path, "DONE"))
        fill_with_priorities(client, "prioritized", [99])  # after the checkpoint: must not come back
    with Server(make_tables(), checkpointer=checkpointer) as restored:
        table = restored.tables["prioritized"]
        assert table.keys() == list(before)  # same items in the same (insertion) order
        assert {k: (table.get(k).priority, table.get(k).times_sampled) for k in table.keys()} == before
        assert restored.tables["queue"].keys() == queue_keys
        info = restored.localhost_client().server_info()
        for name in ("prioritized", "queue"):
            for field in ("current_size", "num_inserts", "num_samples", "num_deletes", "num_evictions"):
                assert getattr(info[name], field) == getattr(info_before[name], field), (name, field)
        # The queue keeps its Fifo order and its data.
        got = [float(s.data[0][0]) for s in restored.localhost_client().sample(
            "queue", 3, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)]
        assert got == [2.0, 3.0, 4.0]


def test_restored_rate_limiter_does_not_block_samplers_forever(tmp_path):
    def tables():
        return [Table("ratio", selectors.Uniform(seed=0), selectors.Fifo(), 1000,
                      rate_limiters.SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=2,
                                                        error_buffer=10.0))]

    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(tables(), checkpointer=checkpointer) as server:
        client = server.localhost_client()
        fill_with_priorities(client, "ratio", range(6))
        # Sample until the rate limiter blocks: without new inserts, samplers now wait.
        with pytest.raises(errors.DeadlineExceededError):
            for _ in client.sample("ratio", 100, timeout=0.3, emit_timesteps=False, unpack_as_table_signature=True):
                pass
        with pytest.raises(errors.DeadlineExceededError, match="ratio"):
            next(client.sample("ratio", 1, timeout=0.3, emit_timesteps=False, unpack_as_table_signature=True))
        client.checkpoint()
    with Server(tables(), checkpointer=checkpointer) as restored:
        client = restored.localhost_client()
        # The documented rule rebases the cursor: samples are allowed again without inserts...
        samples = list(client.sample("ratio", 2, timeout=5, emit_timesteps=False, unpack_as_table_signature=True))
        assert len(samples) == 2
        # ...and after the allowance, sampling waits for inserts as usual, then resumes.
        with pytest.raises(errors.DeadlineExceededError):
            for _ in client.sample("ratio", 100, timeout=0.3, emit_timesteps=False, unpack_as_table_signature=True):
                pass
        fill_with_priorities(client, "ratio", [7, 8, 9])
        assert len(list(client.sample("ratio", 1, timeout=5,
                                      emit_timesteps=False, unpack_as_table_signature=True))) == 1


def test_incomplete_checkpoints_are_ignored(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(make_tables(), checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "uniform", [1, 2])
        good = server.checkpoint()
        fill_with_priorities(server.localhost_client(), "uniform", [3])
        newer = server.checkpoint()
    os.remove(os.path.join(newer, "DONE"))  # as if the process died before the marker
    assert checkpointer.latest() == good
    with Server(make_tables(), checkpointer=checkpointer) as restored:
        assert restored.tables["uniform"].size == 2


def test_kill_9_then_restart_from_checkpoint(tmp_path, tables_yaml, server_process_factory):
    ckpt = tmp_path / "ckpt"
    first = server_process_factory(tables_yaml, "--checkpoint-dir", ckpt)
    client = Client(first.address)
    fill_with_priorities(client, "uniform", range(1, 21))
    list(client.sample("uniform", 5, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
    info_before = client.server_info()["uniform"]
    client.checkpoint()
    fill_with_priorities(client, "uniform", range(100, 110))  # not checkpointed
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=30)
    assert first.proc.returncode == -signal.SIGKILL

    second = server_process_factory(tables_yaml, "--checkpoint-dir", ckpt)
    client = Client(second.address)
    info = client.server_info()["uniform"]
    assert (info.current_size, info.num_inserts, info.num_samples) == \
        (20, info_before.num_inserts, info_before.num_samples)
    seen = {}
    for sample in client.sample("uniform", 400, timeout=10,
                                emit_timesteps=False, unpack_as_table_signature=True):  # sampling resumes
        value = float(sample.data[0][0])
        seen[value] = sample.info.priority
    assert seen == {float(v): float(v) for v in range(1, 21)}  # exactly the checkpointed items
    second.kill()


def test_replay_server_command_prints_tables_and_checkpoints_on_sigterm(tmp_path, tables_yaml,
                                                                        server_process_factory):
    ckpt = tmp_path / "ckpt"
    process = server_process_factory(tables_yaml, "--checkpoint-dir", ckpt)
    client = Client(process.address)
    fill_with_priorities(client, "queue", [1, 2, 3])
    process.terminate()
    code, err = process.read_until_exit()
    assert code == 0, err
    output = "\n".join(process.lines)
    for name in ("uniform", "prioritized", "queue"):
        assert f"table '{name}'" in output
    assert "final checkpoint written" in output
    latest = Checkpointer(str(ckpt)).latest()
    assert latest is not None and os.path.exists(os.path.join(latest, "DONE"))
    tables = {t.name: t for t in Checkpointer.load(latest)}
    assert tables["queue"].size == 3


def test_replay_server_command_rejects_a_bad_config(tmp_path, server_process_factory):
    import subprocess
    import sys

    from tests.replay.server.conftest import REPO_ROOT

    bad = tmp_path / "bad.yaml"
    bad.write_text("tables:\n  - name: t\n    sampler: {kind: Nope}\n    remover: {kind: Fifo}\n"
                   "    max_size: 10\n    rate_limiter: {kind: MinSize, min_size_to_sample: 1}\n")
    result = subprocess.run([sys.executable, "-m", "replay.server_main", "--config", str(bad)],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert result.returncode == 2
    assert "Nope" in result.stderr and "sampler" in result.stderr
