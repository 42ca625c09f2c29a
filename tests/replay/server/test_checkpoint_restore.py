"""Restoring a checkpoint into tables declared with other settings (`replay.checkpoint.RESTORE_RULE`):
the declared max_size, rate limiter, selectors and max_times_sampled win, the change is logged,
inserts and samples go on; a restore logs its progress, a damaged checkpoint ends with a named
error and a restore past its timeout with DeadlineExceededError, the checkpoint left unchanged."""
import hashlib
import logging
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from replay import checkpoint, errors, rate_limiters, selectors
from replay.checkpoint import Checkpointer
from replay.client import Client
from replay.server import Server
from replay.specs import TensorSpec
from replay.table import Table
from tests.replay.server.conftest import REPO_ROOT, fill_with_priorities

pytestmark = pytest.mark.timeout(180)


def _sample_values(client, table, n, timeout=5):
    return [float(np.asarray(s.data[0]).ravel()[0]) for s in client.sample(
        table, n, timeout=timeout, emit_timesteps=False, unpack_as_table_signature=True)]


def _files(directory):
    """path -> SHA-256 of every file under `directory`."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            full = os.path.join(root, name)
            out[os.path.relpath(full, directory)] = hashlib.sha256(open(full, "rb").read()).hexdigest()
    return out


def _flip_bit(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset % len(data)] ^= 0x04
    open(path, "wb").write(bytes(data))


def _declared_messages(caplog):
    return [r.getMessage() for r in caplog.records if "declared settings" in r.getMessage()]


def test_a_checkpoint_saved_with_a_blocking_limiter_restores_into_another_and_inserts_go_on(tmp_path, caplog):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    saved = Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100,
                  rate_limiters.SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=1, error_buffer=2.0))
    with Server([saved], checkpointer=checkpointer) as server:
        client = server.localhost_client()
        for value in (1, 2, 3):
            client.insert(np.float32(value), {"replay": float(value)}, timeout=5)
        with pytest.raises(errors.DeadlineExceededError):  # the saved limiter now blocks inserts
            client.insert(np.float32(4), {"replay": 4.0}, timeout=0.3)
        info_before = client.server_info()["replay"]
        server.checkpoint()
    caplog.set_level(logging.INFO, logger="replay.checkpoint")
    declared = Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 2, rate_limiters.MinSize(1))
    with Server([declared], checkpointer=checkpointer) as restored:
        table = restored.tables["replay"]
        assert table.max_size == 2 and table.config()["rate_limiter"] == declared.config()["rate_limiter"]
        client = restored.localhost_client()
        info = client.server_info()["replay"]
        assert info.current_size == 2  # the declared Fifo remover evicted the oldest item
        assert info.num_evictions == info_before.num_evictions + 1
        assert info.num_inserts == info_before.num_inserts
        assert (info.rate_limiter_info.insert_count, info.rate_limiter_info.sample_count) == (2, 0)
        assert sorted(set(_sample_values(client, "replay", 50))) == [2.0, 3.0]
        for value in range(10, 20):  # the declared MinSize never blocks inserts
            client.insert(np.float32(value), {"replay": 1.0}, timeout=5)
        assert set(_sample_values(client, "replay", 100)) == {18.0, 19.0}
    (message,) = _declared_messages(caplog)
    assert "'replay'" in message and "max_size 100 -> 2" in message
    assert "rate_limiter" in message and "SampleToInsertRatio" in message and "MinSize" in message
    assert "1 items evicted to fit max_size 2" in message and "2 inserts, 0 samples" in message
    assert "sampler" not in message.replace("samples_per_insert", "")  # unchanged fields are not named


def test_a_checkpoint_restored_into_a_stricter_limiter_gets_consistent_counts(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100, rate_limiters.MinSize(1))],
                checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "replay", range(1, 21))
        server.checkpoint()
    # min_diff = 5 - 4 = 1, max_diff = 5 + 4 = 9: 20 items restored put the cursor at max_diff,
    # so 9 - 1 - 0 = 8 samples run before the limiter asks for inserts.
    ratio = rate_limiters.SampleToInsertRatio(samples_per_insert=1.0, min_size_to_sample=5, error_buffer=4.0)
    with Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100, ratio)],
                checkpointer=checkpointer) as restored:
        client = restored.localhost_client()
        limiter = client.server_info()["replay"].rate_limiter_info
        assert (limiter.insert_count, limiter.sample_count) == (20, 11)
        assert len(_sample_values(client, "replay", 8)) == 8
        with pytest.raises(errors.DeadlineExceededError):
            _sample_values(client, "replay", 1, timeout=0.3)
        for value in range(100, 110):  # inserts and samples go on, one for one
            client.insert(np.float32(value), {"replay": 1.0}, timeout=5)
            assert len(_sample_values(client, "replay", 1)) == 1


def test_declared_selectors_and_max_times_sampled_apply_to_the_restored_items(tmp_path, caplog):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server([Table("replay", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1))],
                checkpointer=checkpointer) as server:
        client = server.localhost_client()
        fill_with_priorities(client, "replay", range(1, 7))
        assert _sample_values(client, "replay", 3) == [1.0, 1.0, 1.0]  # the Fifo sampler: item 1, 3 times
        info_before = client.server_info()["replay"]
        server.checkpoint()
    caplog.set_level(logging.WARNING)
    declared = Table("replay", selectors.MaxHeap(), selectors.Lifo(), 4, rate_limiters.MinSize(1),
                     max_times_sampled=2)
    with Server([declared], checkpointer=checkpointer) as restored:
        client = restored.localhost_client()
        table = restored.tables["replay"]
        # Item 1 (sampled 3 >= 2 times) is deleted, then the Lifo remover evicts the newest (6).
        assert table.size == 4 and table.max_times_sampled == 2
        info = client.server_info()["replay"]
        assert info.num_deletes == info_before.num_deletes + 1
        assert info.num_evictions == info_before.num_evictions + 1
        assert _sample_values(client, "replay", 2) == [5.0, 5.0]  # MaxHeap: the highest priority
        assert table.size == 3  # sampled twice: deleted by the declared max_times_sampled
    (message,) = _declared_messages(caplog)
    for field in ("sampler", "remover", "max_size 100 -> 4", "max_times_sampled 0 -> 2",
                  "1 items sampled >= 2 times deleted", "1 items evicted"):
        assert field in message, (field, message)


def test_a_restore_logs_its_progress_in_items_and_chunks(tmp_path, caplog, monkeypatch):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    tables = [Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 10_000, rate_limiters.MinSize(1))]
    with Server(tables, checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "replay", range(1, 1201))
        path = server.checkpoint()
    monkeypatch.setattr(checkpoint, "PROGRESS_EVERY_S", 0.0)  # a line at every step
    caplog.set_level(logging.INFO, logger="replay.checkpoint")
    with Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 10_000, rate_limiters.MinSize(1))],
                checkpointer=checkpointer) as restored:
        assert restored.tables["replay"].size == 1200
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"restoring checkpoint {path}")]
    assert "1200 items and 1200 chunks of tables ['replay'] to load" in lines[0]
    assert any("chunks loaded" in line for line in lines) and any("items loaded" in line for line in lines)
    assert any("MB read and hashed" in line for line in lines)
    assert any("table 'replay': 0 of 1200 items checked" in line for line in lines)
    assert "restored 1200 items and 1200 chunks into tables ['replay']" in lines[-1]
    assert not _declared_messages(caplog)  # same settings: no change line


def test_a_damaged_checkpoint_is_a_named_error_and_leaves_everything_as_it_was(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100, rate_limiters.MinSize(1))],
                checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "replay", range(1, 11))
        path = server.checkpoint()
    _flip_bit(os.path.join(path, "chunks.bin"), 40)
    before = _files(checkpointer.path)
    declared = Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 5, rate_limiters.MinSize(2))
    with pytest.raises(errors.DataLossError, match=r"chunks\.bin") as caught:
        Server([declared], checkpointer=checkpointer)
    assert isinstance(caught.value, errors.CorruptCheckpointError)
    assert _files(checkpointer.path) == before
    assert declared.size == 0 and declared.max_size == 5  # the declared table was not touched


def test_items_that_do_not_fit_a_declared_signature_are_refused(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100, rate_limiters.MinSize(1))],
                checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "replay", [1, 2])  # float32 scalars
        server.checkpoint()
    before = _files(checkpointer.path)
    declared = Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                     signature=TensorSpec((3,), "int64"))
    with pytest.raises(errors.SignatureMismatchError, match="do not fit its declared settings"):
        Server([declared], checkpointer=checkpointer)
    assert _files(checkpointer.path) == before


def test_a_table_declared_without_a_signature_takes_the_checkpoints(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    signature = TensorSpec((), "float32")
    with Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                       signature=signature)], checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "replay", [1, 2])
        server.checkpoint()
    declared = Table("replay", selectors.Fifo(), selectors.Fifo(), 50, rate_limiters.MinSize(1))
    with Server([declared], checkpointer=checkpointer) as restored:
        table = restored.tables["replay"]
        assert table.signature == signature and table.max_size == 50 and table.size == 2
        assert restored.localhost_client().server_info()["replay"].signature == signature


def test_a_restore_past_its_timeout_ends_with_deadline_exceeded(tmp_path):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    tables = [Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 100_000, rate_limiters.MinSize(1))]
    with Server(tables, checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "replay", range(15_000))
        path = server.checkpoint()
    full = float("inf")
    for _ in range(2):  # the quicker of two loads: a load slowed by other work sets no timeout
        start = time.monotonic()
        assert Checkpointer.load(path)[0].size == 15_000
        full = min(full, time.monotonic() - start)
    before = _files(checkpointer.path)
    timeout = full / 20
    slow = Checkpointer(checkpointer.path, restore_timeout=timeout)
    with pytest.raises(errors.DeadlineExceededError, match="ran past its timeout") as caught:
        Server([Table("replay", selectors.Uniform(seed=1), selectors.Fifo(), 10, rate_limiters.MinSize(1))],
               checkpointer=slow)
    # it stopped near its timeout, not after loading everything: the message says where
    stopped_at = re.search(r"stopped while (reading|loading chunks|loading items|building table)"
                           r"[^(]*\((\d+) of (\d+)", str(caught.value))
    assert stopped_at, str(caught.value)
    assert stopped_at.group(1) == "reading" or int(stopped_at.group(2)) < int(stopped_at.group(3))
    assert path in str(caught.value) and _files(checkpointer.path) == before
    with Server(tables, checkpointer=Checkpointer(checkpointer.path, restore_timeout=600)) as restored:
        assert restored.tables["replay"].size == 15_000


@pytest.mark.parametrize("timeout", [0, -1.0, float("inf"), "5", True])
def test_a_bad_restore_timeout_is_refused(tmp_path, timeout):
    with pytest.raises(errors.InvalidArgumentError, match="restore_timeout"):
        Checkpointer(str(tmp_path), restore_timeout=timeout)


TABLES_BEFORE = """\
tables:
  - name: replay
    sampler: {kind: Uniform}
    remover: {kind: Fifo}
    max_size: 1000
    rate_limiter: {kind: SampleToInsertRatio, samples_per_insert: 1.0, min_size_to_sample: 1, error_buffer: 2}
"""
TABLES_AFTER = TABLES_BEFORE.replace("max_size: 1000", "max_size: 2").replace(
    "{kind: SampleToInsertRatio, samples_per_insert: 1.0, min_size_to_sample: 1, error_buffer: 2}",
    "{kind: MinSize, min_size_to_sample: 1}")


def test_replay_server_restores_into_the_declared_tables_and_refuses_a_damaged_checkpoint(
        tmp_path, server_process_factory):
    (tmp_path / "before.yaml").write_text(TABLES_BEFORE)
    (tmp_path / "after.yaml").write_text(TABLES_AFTER)
    ckpt = tmp_path / "ckpt"
    first = server_process_factory(tmp_path / "before.yaml", "--checkpoint-dir", ckpt)
    client = Client(first.address)
    for value in (1, 2, 3):
        client.insert(np.float32(value), {"replay": 1.0}, timeout=5)
    with pytest.raises(errors.DeadlineExceededError):
        client.insert(np.float32(4), {"replay": 1.0}, timeout=0.3)
    first.terminate()
    assert first.read_until_exit()[0] == 0

    second = server_process_factory(tmp_path / "after.yaml", "--checkpoint-dir", ckpt, "--restore-timeout", 120)
    client = Client(second.address)
    for value in range(10, 15):
        client.insert(np.float32(value), {"replay": 1.0}, timeout=5)
    assert set(_sample_values(client, "replay", 50)) == {13.0, 14.0}
    second.terminate()
    code, err = second.read_until_exit()
    assert code == 0, err
    assert "restored with its declared settings" in err and "max_size 1000 -> 2" in err
    assert "restored 2 items and" in err

    for path in Checkpointer(str(ckpt)).checkpoints():
        _flip_bit(os.path.join(path, "items.bin"), 20)
    before = _files(ckpt)
    result = subprocess.run(
        [sys.executable, "-m", "replay.server_main", "--config", str(tmp_path / "after.yaml"),
         "--checkpoint-dir", str(ckpt), "--restore-timeout", "60"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert result.returncode == 2, result.stderr
    assert "cannot restore the checkpoint" in result.stderr and "items.bin" in result.stderr
    assert "listening" not in result.stdout
    assert _files(ckpt) == before
