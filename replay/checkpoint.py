"""Checkpoints of a replay server's whole state, written atomically to a directory.

On the design map this is how a replay server survives restarts: `Checkpointer.save(tables)`
snapshots every table (`Table.checkpoint()`: config, items in insertion order with priorities,
times_sampled and inserted_at, counters including the rate limiter's) and the chunks the items
reference; `load_latest()` rebuilds the tables with `Table.from_checkpoint` (which documents the
rate-limiter restore rule: a restored table never leaves samplers blocked forever).

Layout of one checkpoint (no pickle anywhere; data records are the service's own protobufs):

    <root>/ckpt-<UTC time>-<nanoseconds>/
        manifest.json   format name and version, and per table: config, counters, item count
        chunks.bin      records of replay.ChunkBatch (each an 8-byte little-endian length, then
                        the message), every referenced chunk once, still compressed
        items.bin       records of replay.ItemBatch with times_sampled and inserted_at
        DONE            written last; a checkpoint without it is incomplete and ignored

It is written under <root>/.tmp-<random>, renamed into place, then DONE is created, so a crash
at any point leaves either a complete checkpoint or one that is ignored. Each table's snapshot
is consistent; tables are snapshotted one after another.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import struct
import time
import uuid
from typing import Dict, List, Optional, Sequence

from replay import errors, wire
from replay.proto import replay_pb2

FORMAT = "replay-checkpoint"
FORMAT_VERSION = 1
DONE_MARKER = "DONE"
_RECORD_HEADER = struct.Struct("<Q")
_CHUNKS_PER_RECORD = 512
_ITEMS_PER_RECORD = 4096


def _write_records(path: str, messages) -> None:
    with open(path, "wb") as f:
        for message in messages:
            data = message.SerializeToString()
            f.write(_RECORD_HEADER.pack(len(data)))
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _read_records(path: str, message_type):
    with open(path, "rb") as f:
        data = f.read()
    offset = 0
    while offset < len(data):
        if offset + _RECORD_HEADER.size > len(data):
            raise errors.DataLossError(f"{path}: truncated record header at byte {offset}")
        (size,) = _RECORD_HEADER.unpack_from(data, offset)
        offset += _RECORD_HEADER.size
        if offset + size > len(data):
            raise errors.DataLossError(f"{path}: truncated record at byte {offset} ({size} bytes announced)")
        message = message_type()
        try:
            message.ParseFromString(data[offset:offset + size])
        except Exception as e:
            raise errors.DataLossError(f"{path}: corrupt record at byte {offset}: {e}") from e
        offset += size
        yield message


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Checkpointer:
    """Writes and finds checkpoints under the directory `path`.

    Args:
      path: the root directory (created when missing).
      keep: how many complete checkpoints to keep; older ones are deleted after a save.
    """

    def __init__(self, path: str, keep: int = 2):
        if keep < 1:
            raise errors.InvalidArgumentError(f"keep must be >= 1, got {keep}")
        self.path = os.path.abspath(path)
        self.keep = int(keep)

    def save(self, tables: Sequence) -> str:
        """Writes a checkpoint of `tables` and returns its directory.

        Raises:
          OSError: the directory cannot be written.
        """
        os.makedirs(self.path, exist_ok=True)
        snapshots = [table.checkpoint() for table in tables]
        chunks: Dict[int, object] = {}
        manifest_tables = []
        for config, items, counters in snapshots:
            for item in items:
                chunks.update(item.chunks)
            manifest_tables.append({"config": config, "counters": counters, "num_items": len(items)})
        tmp = os.path.join(self.path, f".tmp-{uuid.uuid4().hex}")
        os.makedirs(tmp)
        try:
            chunk_list = list(chunks.values())

            def chunk_batches():
                for start in range(0, len(chunk_list), _CHUNKS_PER_RECORD):
                    batch = replay_pb2.ChunkBatch()
                    wire.encode_chunks(chunk_list[start:start + _CHUNKS_PER_RECORD], batch)
                    yield batch

            def item_batches():
                for (config, items, _) in snapshots:
                    for start in range(0, len(items), _ITEMS_PER_RECORD):
                        batch = replay_pb2.ItemBatch()
                        wire.encode_items([(config["name"], i) for i in items[start:start + _ITEMS_PER_RECORD]],
                                          batch, with_state=True)
                        yield batch

            _write_records(os.path.join(tmp, "chunks.bin"), chunk_batches())
            _write_records(os.path.join(tmp, "items.bin"), item_batches())
            manifest = {"format": FORMAT, "version": FORMAT_VERSION, "created": time.time(),
                        "num_chunks": len(chunk_list), "tables": manifest_tables}
            with open(os.path.join(tmp, "manifest.json"), "w") as f:
                f.write(wire.json_dumps(manifest))
                f.flush()
                os.fsync(f.fileno())
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
            final = os.path.join(self.path, f"ckpt-{stamp}-{time.time_ns():020d}")
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(self.path)
        with open(os.path.join(final, DONE_MARKER), "w") as f:
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(final)
        self._prune()
        return final

    def checkpoints(self) -> List[str]:
        """Complete checkpoints, oldest first."""
        if not os.path.isdir(self.path):
            return []
        names = sorted(n for n in os.listdir(self.path) if n.startswith("ckpt-"))
        return [os.path.join(self.path, n) for n in names
                if os.path.exists(os.path.join(self.path, n, DONE_MARKER))]

    def latest(self) -> Optional[str]:
        """The newest complete checkpoint, or None."""
        found = self.checkpoints()
        return found[-1] if found else None

    def _prune(self) -> None:
        for old in self.checkpoints()[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        for name in os.listdir(self.path):
            full = os.path.join(self.path, name)
            # Leftovers of crashed saves, or of checkpoints that never got their DONE marker.
            if name.startswith(".tmp-") or (name.startswith("ckpt-") and
                                            not os.path.exists(os.path.join(full, DONE_MARKER))):
                if time.time() - os.path.getmtime(full) > 60:
                    shutil.rmtree(full, ignore_errors=True)

    def load_latest(self) -> Optional[list]:
        """The tables of the newest complete checkpoint, or None when there is none.

        Raises: as `load`.
        """
        latest = self.latest()
        return None if latest is None else self.load(latest)

    @staticmethod
    def load(path: str) -> list:
        """The tables of the checkpoint at `path`, rebuilt with `Table.from_checkpoint`.

        Raises:
          DataLossError: a missing file, a truncated or corrupt record or chunk.
          InvalidArgumentError: an unknown format or version, a bad table config.
        """
        from replay.table import Table

        try:
            with open(os.path.join(path, "manifest.json")) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            raise errors.DataLossError(f"checkpoint {path}: cannot read manifest.json: {e}") from e
        if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
            raise errors.InvalidArgumentError(
                f"checkpoint {path}: format {manifest.get('format')!r} version {manifest.get('version')!r} "
                f"is not {FORMAT!r} version {FORMAT_VERSION}; load it with the replay version that wrote it")
        try:
            chunks = {}
            for batch in _read_records(os.path.join(path, "chunks.bin"), replay_pb2.ChunkBatch):
                for chunk in wire.decode_chunks(batch):
                    chunks[chunk.key] = chunk
            items_by_table: Dict[str, list] = {t["config"]["name"]: [] for t in manifest["tables"]}
            resolve = wire.resolver(chunks, f"checkpoint {path}")
            for batch in _read_records(os.path.join(path, "items.bin"), replay_pb2.ItemBatch):
                for name, item in wire.decode_items(batch, resolve, with_state=True):
                    items_by_table[name].append(item)
        except OSError as e:
            raise errors.DataLossError(f"checkpoint {path}: {e}") from e
        except (errors.NotFoundError, KeyError) as e:
            raise errors.DataLossError(f"checkpoint {path}: inconsistent (item without its chunk or table): {e}") from e
        tables = []
        for entry in manifest["tables"]:
            items = items_by_table[entry["config"]["name"]]
            if len(items) != entry["num_items"]:
                raise errors.DataLossError(
                    f"checkpoint {path}: table {entry['config']['name']!r} has {len(items)} items, the manifest "
                    f"says {entry['num_items']}")
            tables.append(Table.from_checkpoint(entry["config"], items, entry["counters"]))
        return tables
