"""Checkpoints of a server with a chunk directory (`replay.checkpoint_chunk_refs`): they link the
chunk files instead of copying the chunk bytes, restore as views into those files (or into
memory for a server without a chunk directory), survive the pruning of the checkpoint they
were restored from, name a damaged chunk file and fall back to the older checkpoint, and copy
the bytes where the checkpoint directory is on another filesystem."""
import errno
import json
import logging
import os
import re
import shutil
import time

import numpy as np
import pytest

from tests.replay.server.numbered_steps import check_numbered_step, numbered_step
from replay import checkpoint, disk_chunk_store, errors, rate_limiters, segment_files, selectors
from replay.checkpoint import Checkpointer
from replay.server import Server
from replay.table import Table

pytestmark = pytest.mark.timeout(300)

STEP_BYTES = 20_000
TABLES = ("prioritized", "fifo")
PRIORITY_EXPONENT = 0.8


def _tables(max_size=10_000):
    """A prioritized table and a FIFO one whose items are sampled once each (in insertion order:
    the samples of a restored table are known in advance)."""
    return [Table("prioritized", selectors.Prioritized(PRIORITY_EXPONENT, seed=7), selectors.Fifo(), max_size,
                  rate_limiters.MinSize(1)),
            Table("fifo", selectors.Fifo(), selectors.Fifo(), max_size, rate_limiters.MinSize(1),
                  max_times_sampled=1)]


def _priority(i):
    return float(i % 7 + 1)




def _write(client, items):
    with client.trajectory_writer(1) as writer:
        for i in items:
            ref = writer.append(numbered_step(i, STEP_BYTES))
            for name in TABLES:
                writer.create_item(name, _priority(i), ref)


def _samples(client, n=40):
    """The items of n samples of the FIFO table, in order, after n samples of the prioritized
    one; every step's bytes, priority and probability checked."""
    seen = []
    for sample in client.sample("prioritized", n, emit_timesteps=False, timeout=10):
        i = check_numbered_step(sample.data[0], STEP_BYTES)
        assert float(sample.info.priority) == _priority(i)
        seen.append((i, float(sample.info.probability)))
    # probabilities proportional to priority ** exponent: the same factor for every sample
    factors = {round(p / _priority(i) ** PRIORITY_EXPONENT, 9) for i, p in seen}
    assert max(factors) - min(factors) <= 1e-6 * max(factors), factors
    return [check_numbered_step(s.data[0], STEP_BYTES)
            for s in client.sample("fifo", n, emit_timesteps=False, timeout=10)]


def _sampled(client, n):
    """The items of n samples of the prioritized table, every step's bytes checked."""
    return [check_numbered_step(s.data[0], STEP_BYTES)
            for s in client.sample("prioritized", n, emit_timesteps=False, timeout=10)]


def _contents(server):
    """table -> sorted (item key, priority, times_sampled) of every item."""
    out = {}
    for name in TABLES:
        _, items, _ = server.tables[name].checkpoint()
        out[name] = sorted((item.key, item.priority, item.times_sampled) for item in items)
    return out


def _manifest(path):
    with open(os.path.join(path, "manifest.json")) as f:
        return json.load(f)


def _chunk_files(path):
    return sorted(n for n in os.listdir(path) if n.startswith("chunk-file-"))


def _written_bytes():
    """Bytes this process passed to write calls so far (/proc/self/io wchar)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("wchar:")).split()[1])


def _mapped_paths(directory):
    prefix = os.path.realpath(directory) + os.sep
    with open("/proc/self/maps") as f:
        return {line.split(maxsplit=5)[-1].strip() for line in f
                if line.rstrip().split(maxsplit=5)[-1].startswith(prefix)}


@pytest.fixture
def dirs(tmp_path):
    chunk_dir = tmp_path / "chunks"
    chunk_dir.mkdir()
    return str(chunk_dir), str(tmp_path / "ckpt")


def test_a_checkpoint_links_the_segment_files_and_restores_the_same_samples(dirs, monkeypatch):
    chunk_dir, ckpt_dir = dirs
    monkeypatch.setattr(disk_chunk_store, "DEFAULT_SEGMENT_BYTES", 1_000_000)
    server = Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir))
    try:
        _write(server.localhost_client(), range(120))  # 2.4 MB: 3 segments
        path = server.checkpoint()
        manifest = _manifest(path)
        assert manifest["version"] == 3
        names = _chunk_files(path)
        assert len(names) == 3 and [f["name"] for f in manifest["chunk_files"]] == names
        # the checkpoint's chunk files are the server's segment files (hard links), not copies
        segment = server.chunk_store._segment  # noqa: SLF001 - the file being appended to
        assert os.stat(os.path.join(path, names[-1])).st_ino == os.fstat(segment.fd).st_ino
        assert os.listdir(chunk_dir) == []  # the segments still have no name there
        contents = _contents(server)
    finally:
        server.stop(grace=None)
    restored = Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir))
    try:
        assert _contents(restored) == contents
        # the restored chunks are views into the checkpoint's files, mapped read-only
        _, items, _ = restored.tables["prioritized"].checkpoint()
        assert all(type(blob) is memoryview and segment_files.locate(blob) is not None
                   for item in items for chunk in item.chunks.values() for blob in chunk.column_bytes())
        assert _mapped_paths(path) == {os.path.join(path, name) for name in names}
        assert _samples(restored.localhost_client()) == list(range(40))  # every step's bytes checked
    finally:
        restored.stop(grace=None)


def test_a_restored_server_outlives_the_pruning_of_its_checkpoint(dirs, monkeypatch):
    """A server restored from checkpoint A maps A's files; its later saves link them again, so
    pruning A removes names only; the newest checkpoint restores everything, also the items
    inserted after the restore."""
    chunk_dir, ckpt_dir = dirs
    monkeypatch.setattr(disk_chunk_store, "DEFAULT_SEGMENT_BYTES", 1_000_000)
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir, keep=2)) as server:
        _write(server.localhost_client(), range(60))
        first = server.checkpoint()
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir, keep=2)) as restored:
        client = restored.localhost_client()
        _write(client, range(60, 90))
        second = restored.checkpoint()
        for name in _chunk_files(first):  # the restored files are linked again, not copied
            assert os.stat(os.path.join(first, name)).st_nlink == 2
        third = restored.checkpoint()
        assert not os.path.exists(first) and os.path.isdir(second)
        keys = {name: sorted(restored.tables[name].keys()) for name in TABLES}
        assert set(_sampled(client, 200)) <= set(range(90))
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir, keep=2)) as again:
        assert {name: sorted(again.tables[name].keys()) for name in TABLES} == keys
        seen = set(_sampled(again.localhost_client(), 400))
        assert seen <= set(range(90)) and len(seen) > 60
    assert Checkpointer(ckpt_dir).latest() == third


def test_a_save_does_not_write_the_chunk_bytes_again(dirs):
    chunk_dir, ckpt_dir = dirs
    data_bytes = 600 * STEP_BYTES  # 12 MB
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir, keep=5)) as server:
        _write(server.localhost_client(), range(600))
        before = _written_bytes()
        linked = server.checkpoint()
        linking_wrote = _written_bytes() - before
        before = _written_bytes()
        copied = Checkpointer(ckpt_dir, keep=5).save(list(server.tables.values()))  # the copying format
        copying_wrote = _written_bytes() - before
    assert _manifest(linked)["version"] == 3 and _manifest(copied)["version"] == 2
    assert copying_wrote >= data_bytes
    assert linking_wrote < data_bytes / 50, (linking_wrote, data_bytes)  # the index, items, manifest

    def own_blocks(path):  # disk blocks of the files the save wrote (not the linked segments)
        return sum(os.stat(os.path.join(path, n)).st_blocks * 512 for n in os.listdir(path)
                   if not n.startswith("chunk-file-"))

    assert own_blocks(linked) < data_bytes / 50 and own_blocks(copied) >= data_bytes


def _two_checkpoints(chunk_dir, ckpt_dir):
    """(older, newer, keys at the older) of a disk-backed server whose tables grew between
    two checkpoints; 1 MB segments, so the newer one has chunk files of its own."""
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as server:
        client = server.localhost_client()
        _write(client, range(60))
        older = server.checkpoint()
        keys = {name: sorted(server.tables[name].keys()) for name in TABLES}
        _write(client, range(60, 180))
        newer = server.checkpoint()
    return older, newer, keys


def _own_chunk_file(older, newer):
    """The newer checkpoint's chunk file that the older one does not link, and its entry."""
    manifest = _manifest(newer)
    for entry in manifest["chunk_files"]:
        if os.stat(os.path.join(newer, entry["name"])).st_nlink == 1:
            return entry
    raise AssertionError("no chunk file of the newer checkpoint alone")


def _first_ref_into(newer, name):
    """(offset, length) of the first column stored in chunk file `name`."""
    index = [f["name"] for f in _manifest(newer)["chunk_files"]].index(name)
    refs = np.frombuffer(open(os.path.join(newer, "chunk_refs.bin"), "rb").read(), "<u8").reshape(-1, 3)
    file_index, offset, length = next(r for r in refs if r[0] == index and r[2] > 0)
    return int(offset), int(length)


def _truncate(newer, entry):
    os.truncate(os.path.join(newer, entry["name"]), entry["min_size"] - 1)
    return rf"{entry['name']} holds \d+ bytes but field chunk_files\[\d+\]\.min_size"


def _change_bytes(newer, entry):
    offset, length = _first_ref_into(newer, entry["name"])
    with open(os.path.join(newer, entry["name"]), "r+b") as f:
        f.seek(offset + length // 2)
        byte = f.read(1)
        f.seek(offset + length // 2)
        f.write(bytes([byte[0] ^ 0x10]))
    return rf"{entry['name']} at byte {offset} .*checksum"


def _remove(newer, entry):
    os.unlink(os.path.join(newer, entry["name"]))
    return rf"cannot read {entry['name']} \(field chunk_files\[\d+\]"


@pytest.mark.parametrize("damage", [_truncate, _change_bytes, _remove])
def test_a_damaged_chunk_file_is_named_and_the_older_checkpoint_is_restored(dirs, monkeypatch, caplog, damage):
    chunk_dir, ckpt_dir = dirs
    monkeypatch.setattr(disk_chunk_store, "DEFAULT_SEGMENT_BYTES", 1_000_000)
    older, newer, keys = _two_checkpoints(chunk_dir, ckpt_dir)
    message = damage(newer, _own_chunk_file(older, newer))
    with pytest.raises(errors.CorruptCheckpointError, match=message):
        Checkpointer.load(newer)
    caplog.set_level(logging.WARNING)
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as restored:
        assert {name: sorted(restored.tables[name].keys()) for name in TABLES} == keys
        got = _sampled(restored.localhost_client(), 100)
        assert len(got) == 100 and set(got) <= set(range(60))
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert newer in warnings and f"older checkpoint {older}" in warnings


def test_a_referencing_checkpoint_restores_into_a_server_without_a_chunk_directory(dirs):
    chunk_dir, ckpt_dir = dirs
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as server:
        _write(server.localhost_client(), range(50))
        path = server.checkpoint()
        contents = _contents(server)
    assert _manifest(path)["version"] == 3
    with Server(_tables(), checkpointer=Checkpointer(ckpt_dir)) as restored:
        assert _contents(restored) == contents
        _, items, _ = restored.tables["prioritized"].checkpoint()
        assert all(type(blob) is bytes for item in items for chunk in item.chunks.values()
                   for blob in chunk.column_bytes())
        assert not _mapped_paths(path)  # read into memory, nothing kept mapped
        assert _samples(restored.localhost_client()) == list(range(40))


def test_a_file_that_lost_every_name_is_copied_into_the_next_checkpoint(dirs, caplog):
    chunk_dir, ckpt_dir = dirs
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as server:
        _write(server.localhost_client(), range(30))
        server.checkpoint()
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as restored:
        contents = _contents(restored)
        shutil.rmtree(ckpt_dir)  # the mapped files lose their names; their data lives while mapped
        caplog.set_level(logging.INFO, logger="replay.checkpoint_chunk_refs")
        path = restored.checkpoint()
    assert any("copied" in r.getMessage() for r in caplog.records)
    assert _manifest(path)["version"] == 3 and len(_chunk_files(path)) == 1
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as again:
        assert _contents(again) == contents
        assert _samples(again.localhost_client(), 10) == list(range(10))  # every step's bytes checked


def _other_filesystem(path):
    """A writable directory on another filesystem than `path`, or None."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) and \
            os.stat("/dev/shm").st_dev != os.stat(path).st_dev:
        return "/dev/shm"
    return None


def test_checkpoints_on_another_filesystem_copy_the_chunk_bytes(dirs, monkeypatch, caplog, tmp_path):
    """The chunk directory on the test's temporary directory, the checkpoints on /dev/shm where
    that is another filesystem (a real EXDEV); elsewhere the link call fails with EXDEV as it
    would (the one call that meets the other filesystem)."""
    chunk_dir, ckpt_dir = dirs
    other = _other_filesystem(chunk_dir)
    if other is not None:
        ckpt_root = os.path.join(other, f"replay-test-{os.getpid()}-{tmp_path.name}")
    else:
        ckpt_root = ckpt_dir

        def cross_device_link(*args, **kwargs):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

        monkeypatch.setattr(segment_files.os, "link", cross_device_link)
    caplog.set_level(logging.INFO, logger="replay.checkpoint")
    try:
        with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_root, keep=5)) as server:
            _write(server.localhost_client(), range(40))
            first = server.checkpoint()
            second = server.checkpoint()
            contents = _contents(server)
        for path in (first, second):
            assert _manifest(path)["version"] == 2 and not _chunk_files(path)
            assert sorted(os.listdir(path)) == ["DONE", "chunks.bin", "items.bin", "manifest.json"]
        said = [r for r in caplog.records if "copies the chunk data instead of linking" in r.getMessage()]
        assert [r.levelno for r in said] == [logging.WARNING, logging.INFO]  # one warning, then info
        assert "cross-device" in said[0].getMessage().lower()
        with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_root)) as restored:
            _, items, _ = restored.tables["prioritized"].checkpoint()  # moved into the new chunk directory
            assert all(segment_files.locate(blob) is not None for item in items
                       for chunk in item.chunks.values() for blob in chunk.column_bytes())
            assert _contents(restored) == contents
            assert _samples(restored.localhost_client()) == list(range(40))  # every step's bytes checked
    finally:
        if ckpt_root != ckpt_dir:
            shutil.rmtree(ckpt_root, ignore_errors=True)


def _deadline_passes_while(monkeypatch, phase: str, after_checks: int = 1):
    """Makes a restore's deadline pass at its `after_checks`-th check while it is `phase`: the
    place a restore stops depends on nothing the machine's load can move."""
    real_check = checkpoint._RestoreClock.check
    seen = [0]

    def check(clock, path, doing):
        if doing.startswith(phase):
            seen[0] += 1
            if seen[0] >= after_checks:
                clock.deadline = time.monotonic() - 1.0
        return real_check(clock, path, doing)

    monkeypatch.setattr(checkpoint._RestoreClock, "check", check)


def test_a_referencing_restore_logs_progress_and_keeps_its_timeout(dirs, monkeypatch, caplog):
    chunk_dir, ckpt_dir = dirs
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as server:
        _write(server.localhost_client(), range(2000))  # 40 MB
        path = server.checkpoint()
        contents = _contents(server)
    monkeypatch.setattr(checkpoint, "PROGRESS_EVERY_S", 0.0)
    caplog.set_level(logging.INFO, logger="replay.checkpoint")
    _deadline_passes_while(monkeypatch, "loading chunks", after_checks=3)
    with pytest.raises(errors.DeadlineExceededError, match="ran past its timeout") as caught:
        Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir, restore_timeout=3600))
    assert path in str(caught.value)
    stopped_at = re.search(r"loading chunks \((\d+) of (\d+)", str(caught.value))
    assert stopped_at and 0 < int(stopped_at.group(1)) < int(stopped_at.group(2)), str(caught.value)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"restoring checkpoint {path}")]
    assert any("chunks loaded and checked" in line for line in lines), lines
    monkeypatch.undo()
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as restored:
        assert _contents(restored) == contents  # the stopped restore left the checkpoint whole


@pytest.mark.parametrize("phase", ["reading items.bin", "reading chunks.bin"])
def test_a_restore_that_runs_out_of_time_reading_a_file_says_so(dirs, monkeypatch, phase):
    """The deadline passing while a data file is read is a timeout, not a corrupt file (a timeout
    is an OSError in Python; the checkpoint must not be skipped as unreadable)."""
    chunk_dir, ckpt_dir = dirs
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as server:
        _write(server.localhost_client(), range(20))
        path = server.checkpoint()
    _deadline_passes_while(monkeypatch, phase)
    with pytest.raises(errors.DeadlineExceededError, match=f"stopped while {phase}") as caught:
        Checkpointer(ckpt_dir, restore_timeout=3600).load_latest()
    assert path in str(caught.value)


def _mapped_file_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:")) / 1024


def test_a_restore_under_a_chunk_cache_bound_keeps_the_files_mostly_unmapped(dirs):
    """A restore reads every byte of the chunk files (their checksums) through the mappings: it
    drops the pages it read every 16 MB, and the server's bound then covers the files."""
    import gc
    import threading

    chunk_dir, ckpt_dir = dirs
    server = Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir))
    _write(server.localhost_client(), range(4000))  # 80 MB
    server.checkpoint()
    server.stop(grace=None)
    del server
    gc.collect()
    idle, peak, done = _mapped_file_mb(), [0.0], threading.Event()

    def poll():
        while not done.wait(0.005):
            peak[0] = max(peak[0], _mapped_file_mb())

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        restored = Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir),
                          chunk_cache_bytes=16 << 20)
    finally:
        done.set()
        poller.join()
    try:
        assert restored.tables["fifo"].size == 4000
        assert peak[0] - idle <= 16 + 8, (idle, peak)  # 16 MB between drops, slack
        # 40 MB of samples read all over the files: the bound drops their pages too
        assert len(_sampled(restored.localhost_client(), 2000)) == 2000
        time.sleep(0.1)  # the bound's thread checks every 10 ms
        assert _mapped_file_mb() - idle <= 16, (idle, _mapped_file_mb())
    finally:
        restored.stop(grace=None)


def test_replay_server_restarts_from_the_chunk_files_of_its_final_checkpoint(dirs, tables_yaml,
                                                                              server_process_factory):
    """`replay-server --chunk-dir D --checkpoint-dir C`: the final checkpoint at shutdown links the
    chunk files, and the restarted server serves the same items from them."""
    from replay.client import Client

    chunk_dir, ckpt_dir = dirs
    process = server_process_factory(tables_yaml, "--chunk-dir", chunk_dir, "--checkpoint-dir", ckpt_dir)
    client = Client(process.address)
    try:
        with client.trajectory_writer(1) as writer:
            for i in range(5):
                writer.create_item("queue", 1.0, writer.append(numbered_step(i, STEP_BYTES)))
    finally:
        client.close()
    process.terminate()
    code, _ = process.read_until_exit()
    assert code == 0
    path = Checkpointer(ckpt_dir).latest()
    assert _manifest(path)["version"] == 3 and _chunk_files(path)
    again = server_process_factory(tables_yaml, "--chunk-dir", chunk_dir, "--checkpoint-dir", ckpt_dir)
    client = Client(again.address)
    try:
        got = [check_numbered_step(s.data[0], STEP_BYTES)
               for s in client.sample("queue", 5, emit_timesteps=False, timeout=10)]
        assert got == list(range(5))
    finally:
        client.close()
    again.terminate()
    assert again.read_until_exit()[0] == 0


def test_without_o_tmpfile_the_segments_are_unlinked_files_and_checkpoints_copy(dirs, monkeypatch, caplog):
    """A filesystem or kernel without O_TMPFILE (the open fails as there): segments are named
    files unlinked at once, which cannot be linked, so checkpoints copy the chunk bytes."""
    chunk_dir, ckpt_dir = dirs
    real_open = os.open

    def open_without_tmpfile(path, flags, *args, **kwargs):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(segment_files.os, "open", open_without_tmpfile)
    caplog.set_level(logging.WARNING)
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as server:
        assert os.listdir(chunk_dir) == []
        _write(server.localhost_client(), range(30))
        path = server.checkpoint()
        contents = _contents(server)
    assert _manifest(path)["version"] == 2
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "cannot create files with O_TMPFILE" in messages
    assert "copies the chunk data instead of linking" in messages and "without O_TMPFILE" in messages
    with Server(_tables(), chunk_dir=chunk_dir, checkpointer=Checkpointer(ckpt_dir)) as restored:
        assert _contents(restored) == contents
        assert _samples(restored.localhost_client(), 30) == list(range(30))
