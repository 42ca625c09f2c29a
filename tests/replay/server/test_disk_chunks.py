"""A server started with a chunk directory (`replay.disk_chunk_store`) against an in-memory one:
the same data through inserts, samples and datasets with every selector; segment files freed with
their last chunk; bad directories refused at start."""
import os
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.replay.server.numbered_steps import check_numbered_step, numbered_step
from replay import disk_chunk_store, errors, rate_limiters, selectors
from replay.dataset import ReplayDataset
from replay.disk_chunk_store import DiskChunkStore
from replay.server import Server
from replay.table import Table

pytestmark = pytest.mark.timeout(180)

SELECTORS = {
    "uniform": lambda: selectors.Uniform(seed=7),
    "fifo": selectors.Fifo,
    "lifo": selectors.Lifo,
    "prioritized": lambda: selectors.Prioritized(0.8, seed=7),
    "min_heap": selectors.MinHeap,
    "max_heap": selectors.MaxHeap,
}
ITEM_STEPS = 3
NUM_STEPS = 40


def _tables(max_size=1000):
    return [Table(name, make(), selectors.Fifo(), max_size, rate_limiters.MinSize(1))
            for name, make in SELECTORS.items()]


def _step(t):
    """A step whose leaves encode `t`: a frame large enough to be lz4-compressed, a small
    vector stored raw, a scalar."""
    frame = np.zeros((24, 24), np.uint8)
    frame[t % 24] = t % 251
    return {"frame": frame, "obs": np.array([t, t + 0.25, -t], np.float32), "t": np.int64(t)}


def _write(client, num_steps=NUM_STEPS):
    """The same items into every table: 3-step items ending at each step from the third, with
    priority (t * 7) % 11 so the heaps and the prioritized selector have an order to follow."""
    with client.trajectory_writer(ITEM_STEPS, chunk_length=4) as writer:
        for t in range(num_steps):
            writer.append(_step(t))
            if t >= ITEM_STEPS - 1:
                trajectory = {key: writer.history[key][-ITEM_STEPS:] for key in ("frame", "obs", "t")}
                for name in SELECTORS:
                    writer.create_item(name, float((t * 7) % 11 + 1), trajectory)
        writer.flush()


def _check_item(data):
    """`data`: (frame, obs, t) of one item, as sampled; checks it against `_step`."""
    frame, obs, t = (np.asarray(leaf) for leaf in data)
    last = int(t[-1])
    np.testing.assert_array_equal(t, np.arange(last - ITEM_STEPS + 1, last + 1))
    for i, step_t in enumerate(t):
        expected = _step(int(step_t))
        np.testing.assert_array_equal(frame[i], expected["frame"])
        np.testing.assert_array_equal(obs[i], expected["obs"])
    return last


def _samples(client, table, n):
    out = []
    for sample in client.sample(table, n, emit_timesteps=False, unpack_as_table_signature=True, timeout=10):
        out.append((_check_item(sample.data), float(sample.info.priority), round(float(sample.info.probability), 6)))
    return out


@pytest.fixture
def servers(tmp_path):
    memory = Server(_tables())
    disk = Server(_tables(), chunk_dir=str(tmp_path))
    yield memory, disk
    memory.stop(grace=None)
    disk.stop(grace=None)


def _segment_mappings(directory):
    """This process's mappings of (unlinked) files under `directory`."""
    prefix = os.path.realpath(directory) + os.sep
    with open("/proc/self/maps") as f:
        return [line for line in f if line.rstrip().split(maxsplit=5)[-1].startswith(prefix)]


def _eventually(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_samples_with_every_selector_match_the_in_memory_server(servers, tmp_path):
    memory, disk = servers
    memory_client, disk_client = memory.localhost_client(), disk.localhost_client()
    _write(memory_client)
    _write(disk_client)
    # the chunks' bytes are views into the segment mapping, the directory holds no file
    stored = disk.chunk_store.get(disk.chunk_store.keys())
    assert stored and all(type(data) is memoryview for chunk in stored for data in chunk.column_bytes())
    assert os.listdir(tmp_path) == []
    assert _segment_mappings(tmp_path)
    for name in SELECTORS:
        expected = _samples(memory_client, name, 30)
        got = _samples(disk_client, name, 30)
        assert got == expected, name  # the same seeded choices, priorities and data
    assert {name: info.current_size for name, info in disk_client.server_info().items()} == {
        name: NUM_STEPS - ITEM_STEPS + 1 for name in SELECTORS}
    memory_client.close()
    disk_client.close()


def test_a_dataset_with_every_selector_reads_the_same_items(servers):
    memory, disk = servers
    for server in servers:
        _write(server.localhost_client())
    dtypes = (tf.uint8, tf.float32, tf.int64)
    shapes = ([ITEM_STEPS, 24, 24], [ITEM_STEPS, 3], [ITEM_STEPS])
    for name in SELECTORS:
        read = []
        for server in (memory, disk):
            with ReplayDataset(server.localhost_client().address, name, dtypes, shapes,
                               max_in_flight_samples_per_worker=4, num_workers_per_iterator=1,
                               max_samples=20) as dataset:
                elements = [(_check_item([leaf.numpy() for leaf in e.data]), float(e.info.priority))
                            for e in dataset]
            assert len(elements) == 20
            read.append(elements)
        if name in ("fifo", "lifo", "min_heap", "max_heap"):  # deterministic: the exact sequence
            assert read[0] == read[1], name
        else:  # in flight ahead of use: the same items, not necessarily the same order
            keys = {t for t, _ in read[0] + read[1]}
            assert keys <= set(range(ITEM_STEPS - 1, NUM_STEPS)), name


def test_one_leaf_steps_and_a_checkpoint_of_disk_chunks(tmp_path):
    """Steps of one leaf (the server's one-column chunks) and a checkpoint written from
    disk-backed chunks, restored into a disk-backed server."""
    from replay.checkpoint import Checkpointer

    chunk_dir = tmp_path / "chunks"
    chunk_dir.mkdir()
    checkpoints = Checkpointer(str(tmp_path / "checkpoints"))
    server = Server([Table("fifo", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1))],
                    chunk_dir=str(chunk_dir), checkpointer=checkpoints)
    client = server.localhost_client()
    with client.trajectory_writer(1) as writer:
        for t in range(10):
            writer.create_item("fifo", 1.0, writer.append(np.full(5, t, np.int32)))
    path = client.checkpoint()
    server.stop(grace=None)
    assert os.path.isdir(path)
    restored = Server([Table("fifo", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                             max_times_sampled=1)],
                      chunk_dir=str(chunk_dir), checkpointer=Checkpointer(str(tmp_path / "checkpoints")))
    try:
        _, items, _ = restored.tables["fifo"].checkpoint()
        assert all(type(data) is memoryview for item in items
                   for chunk in item.chunks.values() for data in chunk.column_bytes())
        restored_client = restored.localhost_client()
        got = [int(np.asarray(s.data[0])[0])
               for s in restored_client.sample("fifo", 10, emit_timesteps=False, timeout=10)]
        assert got == list(range(10))
    finally:
        restored.stop(grace=None)


def test_segment_space_is_released_when_items_are_evicted(tmp_path, monkeypatch):
    """Items of 20 kB of incompressible steps into a table of 10 items, with 100 kB segments:
    the segments of evicted items are unmapped (their disk space freed) while the table lives."""
    monkeypatch.setattr(disk_chunk_store, "DEFAULT_SEGMENT_BYTES", 100_000)
    server = Server([Table("fifo", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1))],
                    chunk_dir=str(tmp_path))
    rng = np.random.default_rng(0)
    client = server.localhost_client()
    try:
        with client.trajectory_writer(1) as writer:
            for t in range(200):  # 4 MB in all, 40 segments
                writer.create_item("fifo", 1.0, writer.append(rng.integers(0, 255, 20_000, np.uint8)))
                if t % 20 == 19:
                    writer.flush()
                    # 10 items of 20 kB: at most 3 segments of theirs and the current one
                    # 10 live items of 20 kB, 5 to a segment: at most 3 segments (the current one
                    # among them) once the server has handled the writer's releases
                    assert _eventually(lambda: len(_segment_mappings(tmp_path)) <= 3)
        assert client.server_info()["fifo"].current_size == 10
        data = [np.asarray(s.data[0]) for s in client.sample("fifo", 10, emit_timesteps=False, timeout=10)]
        assert all(d.shape == (20_000,) for d in data)
    finally:
        client.close()
        server.stop(grace=None)


def test_the_segments_are_freed_when_the_table_is_reset(tmp_path, monkeypatch):
    """A segment file, unlinked at once, is freed with its mapping: once no chunk is left, only
    the segment being filled remains."""
    monkeypatch.setattr(disk_chunk_store, "DEFAULT_SEGMENT_BYTES", 1_000_000)
    server = Server([Table("fifo", selectors.Fifo(), selectors.Fifo(), 1000, rate_limiters.MinSize(1))],
                    chunk_dir=str(tmp_path))
    client = server.localhost_client()
    rng = np.random.default_rng(1)
    try:
        with client.trajectory_writer(1) as writer:
            for _ in range(200):  # 10 MB of incompressible steps: 10 segments
                writer.create_item("fifo", 1.0, writer.append(rng.integers(0, 255, 50_000, np.uint8)))
        mapped = _segment_mappings(tmp_path)
        assert mapped
        client.reset("fifo")
        # the current segment stays open for the next chunks; the full ones are gone
        assert len(mapped) >= 10
        assert _eventually(lambda: len(_segment_mappings(tmp_path)) <= 1)
    finally:
        client.close()
        server.stop(grace=None)


def test_a_bad_chunk_dir_raises_a_named_error_at_start(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"x")
    with pytest.raises(errors.ChunkDirError, match="is not a directory"):
        Server(_tables(), chunk_dir=str(not_a_dir))
    with pytest.raises(errors.ChunkDirError, match="does not exist"):
        Server(_tables(), chunk_dir=str(tmp_path / "missing"))
    if os.geteuid() != 0:  # root writes anywhere
        read_only = tmp_path / "read_only"
        read_only.mkdir()
        read_only.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            with pytest.raises(errors.ChunkDirError, match="writable"):
                DiskChunkStore(str(read_only))
        finally:
            read_only.chmod(stat.S_IRWXU)
    with pytest.raises(errors.ChunkDirError, match="writable"):
        DiskChunkStore("/proc/self")  # a directory where no file can be created, even by root
    with pytest.raises(errors.InvalidArgumentError, match="segment_bytes"):
        DiskChunkStore(str(tmp_path), segment_bytes=0)


def test_replay_server_command_keeps_chunks_in_the_chunk_dir(tmp_path, tables_yaml, server_process_factory):
    from replay.client import Client
    from tests.replay.server.conftest import REPO_ROOT

    process = server_process_factory(tables_yaml, "--chunk-dir", tmp_path)
    client = Client(process.address)
    try:
        _write_queue(client)
        got = [int(np.asarray(s.data[0])[0]) for s in client.sample("queue", 5, emit_timesteps=False, timeout=10)]
        assert got == list(range(5))
    finally:
        client.close()
    process.terminate()
    code, _ = process.read_until_exit()
    assert code == 0
    assert any(f"chunk data in {tmp_path}" in line for line in process.lines)

    result = subprocess.run([sys.executable, "-m", "replay.server_main", "--config", str(tables_yaml),
                             "--chunk-dir", str(tmp_path / "missing")],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert result.returncode == 2
    assert "chunk directory" in result.stderr and "does not exist" in result.stderr


def _write_queue(client):
    with client.trajectory_writer(1) as writer:
        for t in range(5):
            writer.create_item("queue", 1.0, writer.append(np.full(300, t, np.int32)))


BOUND_MB = 16
BOUNDED_ITEM_BYTES = 100_000
BOUNDED_ITEMS = 1600  # 160 MB of incompressible chunk data: 10x the bound
BOUNDED_TABLES_YAML = "tables:\n" + "".join(
    f"  - {{name: {name}, sampler: {{kind: {kind}}}, remover: {{kind: Fifo}}, max_size: 10000, "
    "rate_limiter: {kind: MinSize, min_size_to_sample: 1}}\n"
    for name, kind in [("uniform", "Uniform"), ("fifo", "Fifo"), ("lifo", "Lifo"),
                       ("prioritized", "Prioritized, priority_exponent: 0.8"), ("max_heap", "MaxHeap"),
                       ("min_heap", "MinHeap")])




class _ServerMemory:
    """Polls a process's RssAnon and RssFile (MB) every 10 ms and keeps the peaks."""

    def __init__(self, pid):
        import threading

        self.pid = pid
        self.idle = self.read()
        self.peak = dict(self.idle, total=self.idle["RssAnon"] + self.idle["RssFile"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def read(self):
        fields = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("RssAnon", "RssFile"):
                    fields[name] = int(value.split()[0]) / 1024
        return fields

    def _run(self):
        while not self._stop.wait(0.01):
            now = self.read()
            for name, value in now.items():
                self.peak[name] = max(self.peak[name], value)
            self.peak["total"] = max(self.peak["total"], now["RssAnon"] + now["RssFile"])

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def test_a_chunk_cache_bound_serves_a_table_of_ten_times_its_size(tmp_path, server_process_factory):
    """`replay-server --chunk-dir D --chunk-cache-mb 16` holds 160 MB of chunk data in tables of
    every selector and serves inserts, samples and a dataset from it with the chunk pages it
    maps (RssFile) within the bound, and RssAnon+RssFile within the idle process's plus the
    bound plus 48 MB (items, messages, the heap the server keeps for its responses)."""
    from replay.client import Client

    config = tmp_path / "tables.yaml"
    config.write_text(BOUNDED_TABLES_YAML)
    chunk_dir = tmp_path / "chunks"
    chunk_dir.mkdir()
    process = server_process_factory(config, "--chunk-dir", chunk_dir, "--chunk-cache-mb", BOUND_MB)
    memory = _ServerMemory(process.proc.pid)
    client = Client(process.address)
    names = ["uniform", "fifo", "lifo", "prioritized", "max_heap", "min_heap"]
    try:
        with client.trajectory_writer(1) as writer:
            for i in range(BOUNDED_ITEMS):
                ref = writer.append(numbered_step(i, BOUNDED_ITEM_BYTES))
                for name in names:
                    writer.create_item(name, float(i % 13 + 1), ref)
        info = client.server_info()
        assert all(info[name].current_size == BOUNDED_ITEMS for name in names)
        for name in names:
            seen = [check_numbered_step(s.data[0], BOUNDED_ITEM_BYTES) for _ in range(10)
                    for s in client.sample(name, 20, emit_timesteps=False, timeout=10)]
            assert len(seen) == 200
            if name == "fifo":
                assert seen[0] == 0
            elif name == "lifo":
                assert seen[0] == BOUNDED_ITEMS - 1
            elif name == "max_heap":
                assert all(i % 13 == 12 for i in seen)  # the highest priority, never sampled out
        with ReplayDataset(process.address, "uniform", (tf.uint8,), ([BOUNDED_ITEM_BYTES],),
                           max_in_flight_samples_per_worker=8, num_workers_per_iterator=1,
                           max_samples=300) as dataset:
            read = [check_numbered_step(e.data[0].numpy(), BOUNDED_ITEM_BYTES) for e in dataset]
        assert len(read) == 300 and len(set(read)) > 200  # uniform over 1600 items
        with client.trajectory_writer(1) as writer:  # inserts go on into the full-size tables
            for i in range(BOUNDED_ITEMS, BOUNDED_ITEMS + 100):
                writer.create_item("fifo", 1.0, writer.append(numbered_step(i, BOUNDED_ITEM_BYTES)))
        assert client.server_info()["fifo"].current_size == BOUNDED_ITEMS + 100
    finally:
        client.close()
        peak = memory.stop()
    idle = memory.idle
    table_mb = BOUNDED_ITEMS * BOUNDED_ITEM_BYTES / 2**20
    assert table_mb >= 9.5 * BOUND_MB
    assert peak["RssFile"] - idle["RssFile"] <= BOUND_MB + 2, (idle, peak)
    assert peak["total"] <= idle["RssAnon"] + idle["RssFile"] + BOUND_MB + 48, (idle, peak)
    process.terminate()
    code, _ = process.read_until_exit()
    assert code == 0
    assert any(f"at most {BOUND_MB} MB of it mapped in memory" in line for line in process.lines)


def test_the_chunk_cache_bound_is_checked(tmp_path, tables_yaml):
    from tests.replay.server.conftest import REPO_ROOT

    with pytest.raises(errors.InvalidArgumentError, match="pass chunk_dir too"):
        Server(_tables(), chunk_cache_bytes=1 << 20)
    with pytest.raises(errors.InvalidArgumentError, match="chunk_cache_bytes must be a positive integer"):
        Server(_tables(), chunk_dir=str(tmp_path), chunk_cache_bytes=0)
    with pytest.raises(errors.InvalidArgumentError, match="cache_bytes must be positive"):
        DiskChunkStore(str(tmp_path), cache_bytes=-1)
    for args in (["--chunk-cache-mb", "8"], ["--chunk-dir", str(tmp_path), "--chunk-cache-mb", "0"]):
        result = subprocess.run([sys.executable, "-m", "replay.server_main", "--config", str(tables_yaml), *args],
                                capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                                env=dict(os.environ, PYTHONPATH=REPO_ROOT))
        assert result.returncode == 2
        assert "--chunk-cache-mb needs --chunk-dir and a positive number of MB" in result.stderr


def test_dropped_pages_are_read_again_with_the_same_bytes(tmp_path):
    """A store that dropped its pages from memory reads every chunk's bytes as written."""
    server = Server([Table("fifo", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                           max_times_sampled=1)],
                    chunk_dir=str(tmp_path), chunk_cache_bytes=1 << 20)
    client = server.localhost_client()
    try:
        with client.trajectory_writer(1) as writer:
            for i in range(20):
                writer.create_item("fifo", 1.0, writer.append(numbered_step(i, BOUNDED_ITEM_BYTES)))
        server.chunk_store.drop_resident_pages()
        got = [check_numbered_step(s.data[0], BOUNDED_ITEM_BYTES)
               for s in client.sample("fifo", 20, emit_timesteps=False, timeout=10)]
        assert got == list(range(20))
        assert server.chunk_store.trims >= 1
    finally:
        client.close()
        server.stop(grace=None)
