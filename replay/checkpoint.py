"""Checkpoints of a replay server's whole state, written atomically to a directory.

This is how a replay server survives restarts: `Checkpointer.save(tables)`
snapshots every table (`Table.checkpoint()`: config, items in insertion order with priorities,
times_sampled and inserted_at, counters including the rate limiter's) and the chunks the items
reference; `load_latest()` rebuilds the tables with `Table.from_checkpoint` (which documents the
rate-limiter restore rule: a restored table never leaves samplers blocked forever).
See docs/architecture.md, "Checkpoints".

Layout of one checkpoint (no pickle anywhere; data records are the service's own protobufs):

    <root>/ckpt-<UTC time>-<nanoseconds>/
        manifest.json   format name and version; the size and SHA-256 of chunks.bin and
                        items.bin; per table: config, counters, item count
        chunks.bin      records of replay.ChunkBatch (each an 8-byte little-endian length, then
                        the message), every referenced chunk once, still compressed
        items.bin       records of replay.ItemBatch with times_sampled and inserted_at
        DONE            written last: the SHA-256 of manifest.json, in `sha256sum` format (so
                        `sha256sum -c DONE` run in the directory checks it); a checkpoint
                        without it is incomplete and ignored

It is written under <root>/.tmp-<random>, renamed into place, then DONE is created, so a crash
at any point leaves either a complete checkpoint or one that is ignored. Each table's snapshot
is consistent; tables are snapshotted one after another.

Loading verifies every checksum and every manifest field before building anything: a flipped
bit or a malformed field raises `CorruptCheckpointError` naming the file and the field, and
`load_latest` then falls back to the previous complete checkpoint (with a warning in the log).
Checkpoints of format version 1 (written before checksums existed) still load, with a warning
that they are unverified; the next save writes a verified one.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import shutil
import struct
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

from replay import codec, errors, protocol
from replay.proto import replay_pb2

log = logging.getLogger(__name__)

FORMAT = "replay-checkpoint"
FORMAT_VERSION = 2
# Written before checkpoints carried checksums: loaded with a warning that they are unverified.
_UNVERIFIED_VERSIONS = (1,)
DONE_MARKER = "DONE"
MANIFEST = "manifest.json"
DATA_FILES = ("chunks.bin", "items.bin")
_TABLE_COUNTERS = ("num_inserts", "num_samples", "num_deletes", "num_evictions", "num_updates",
                   "num_unique_samples", "num_deleted_episodes")
_RECORD_HEADER = struct.Struct("<Q")
_CHUNKS_PER_RECORD = 512
_ITEMS_PER_RECORD = 4096


def _write_records(path: str, messages) -> dict:
    """Writes the records and returns {"size", "sha256"} of the file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "wb") as f:
        for message in messages:
            data = message.SerializeToString()
            header = _RECORD_HEADER.pack(len(data))
            for part in (header, data):
                f.write(part)
                digest.update(part)
            size += len(header) + len(data)
        f.flush()
        os.fsync(f.fileno())
    return {"size": size, "sha256": digest.hexdigest()}


def _records(data: bytes, where: str, message_type):
    offset = 0
    while offset < len(data):
        if offset + _RECORD_HEADER.size > len(data):
            raise errors.CorruptCheckpointError(f"{where}: truncated record header at byte {offset}")
        (size,) = _RECORD_HEADER.unpack_from(data, offset)
        offset += _RECORD_HEADER.size
        if offset + size > len(data):
            raise errors.CorruptCheckpointError(
                f"{where}: truncated record at byte {offset} ({size} bytes announced)")
        message = message_type()
        try:
            message.ParseFromString(data[offset:offset + size])
        except Exception as e:
            raise errors.CorruptCheckpointError(f"{where}: corrupt record at byte {offset}: {e}") from e
        offset += size
        yield message


def _read(path: str, name: str) -> bytes:
    try:
        with open(os.path.join(path, name), "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.CorruptCheckpointError(f"checkpoint {path}: cannot read {name}: {e}") from e


class _Fields:
    """Reads typed fields of a checkpoint's manifest, naming the file and the field's path in
    every error."""

    def __init__(self, checkpoint: str, file: str = MANIFEST):
        self.where = f"checkpoint {checkpoint}: {file}"

    def fail(self, field: str, problem: str):
        raise errors.CorruptCheckpointError(
            f"{self.where}: field {field} {problem}; the checkpoint is corrupt or was not written by "
            "replay (use an older checkpoint, or start without one)")

    def get(self, obj: dict, key: str, field: str, kind: str, optional: bool = False) -> Any:
        """obj[key] checked to be of `kind`: 'count' (int >= 0), 'number', 'str', 'dict', 'list'."""
        if key not in obj:
            if optional:
                return None
            self.fail(field, "is missing")
        value = obj[key]
        ok = {
            "count": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "str": lambda v: isinstance(v, str),
            "dict": lambda v: isinstance(v, dict),
            "list": lambda v: isinstance(v, list),
        }[kind](value)
        if not ok:
            expected = {"count": "an integer >= 0", "number": "a number", "str": "a string",
                        "dict": "an object", "list": "a list"}[kind]
            self.fail(field, f"must be {expected}, got {value!r:.80}")
        return value


def _parse_manifest(path: str, raw: bytes) -> dict:
    """The manifest with every field checked (types, required fields, unique table names).

    Raises:
      CorruptCheckpointError: a field is missing or malformed (the message names it).
      InvalidArgumentError: another format, or a version this replay cannot read.
    """
    fields = _Fields(path)
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise errors.CorruptCheckpointError(f"checkpoint {path}: {MANIFEST} is not JSON: {e}") from e
    if not isinstance(manifest, dict):
        fields.fail("(top level)", "must be an object")
    fmt = fields.get(manifest, "format", "format", "str")
    version = fields.get(manifest, "version", "version", "count")
    if fmt != FORMAT or (version != FORMAT_VERSION and version not in _UNVERIFIED_VERSIONS):
        raise errors.InvalidArgumentError(
            f"checkpoint {path}: format {fmt!r} version {version!r} is not {FORMAT!r} version "
            f"{FORMAT_VERSION}; load it with the replay version that wrote it")
    fields.get(manifest, "created", "created", "number", optional=True)
    fields.get(manifest, "num_chunks", "num_chunks", "count")
    if version == FORMAT_VERSION:
        files = fields.get(manifest, "files", "files", "dict")
        for name in DATA_FILES:
            entry = fields.get(files, name, f"files.{name}", "dict")
            fields.get(entry, "size", f"files.{name}.size", "count")
            digest = fields.get(entry, "sha256", f"files.{name}.sha256", "str")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                fields.fail(f"files.{name}.sha256", f"must be 64 lowercase hex digits, got {digest!r:.80}")
    tables = fields.get(manifest, "tables", "tables", "list")
    names = set()
    for i, entry in enumerate(tables):
        label = f"tables[{i}]"
        if not isinstance(entry, dict):
            fields.fail(label, f"must be an object, got {entry!r:.80}")
        config = fields.get(entry, "config", f"{label}.config", "dict")
        name = fields.get(config, "name", f"{label}.config.name", "str")
        if name in names:
            fields.fail(f"{label}.config.name", f"repeats table name {name!r}")
        names.add(name)
        fields.get(entry, "num_items", f"{label}.num_items", "count")
        counters = fields.get(entry, "counters", f"{label}.counters", "dict")
        for counter in _TABLE_COUNTERS:
            fields.get(counters, counter, f"{label}.counters.{counter}", "count", optional=True)
        limiter = fields.get(counters, "rate_limiter", f"{label}.counters.rate_limiter", "dict", optional=True)
        for counter in ("insert_count", "sample_count", "delete_count"):
            if limiter is not None:
                fields.get(limiter, counter, f"{label}.counters.rate_limiter.{counter}", "number",
                           optional=True)
        fields.get(counters, "extensions", f"{label}.counters.extensions", "list", optional=True)
    return manifest


def _manifest_digest_line(manifest_bytes: bytes) -> str:
    """The DONE marker's content: `sha256sum` output for manifest.json."""
    return f"{hashlib.sha256(manifest_bytes).hexdigest()}  {MANIFEST}\n"


def _verify_manifest(path: str, manifest_bytes: bytes) -> bool:
    """Checks manifest.json against the digest in DONE; False for an empty DONE (a checkpoint
    written before checksums existed).

    Raises:
      CorruptCheckpointError: DONE is unreadable or malformed, or the digest differs.
    """
    done = _read(path, DONE_MARKER)
    if not done:
        return False
    try:
        text = done.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    if text != _manifest_digest_line(manifest_bytes):
        digest, _, name = text.strip().partition("  ")
        if name != MANIFEST or len(digest) != 64:
            raise errors.CorruptCheckpointError(
                f"checkpoint {path}: {DONE_MARKER} does not hold the SHA-256 of {MANIFEST} "
                f"({done[:100]!r}); the checkpoint is corrupt")
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {MANIFEST} does not match the SHA-256 in {DONE_MARKER} (the file "
            "changed after it was written); the checkpoint is corrupt")
    return True


def _verify_file(path: str, name: str, data: bytes, expected: dict) -> None:
    if len(data) != expected["size"]:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {name} holds {len(data)} bytes but {MANIFEST} says {expected['size']} "
            "(truncated or replaced); the checkpoint is corrupt")
    if hashlib.sha256(data).hexdigest() != expected["sha256"]:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {name} does not match its SHA-256 in {MANIFEST} (corrupt file); the "
            "checkpoint is corrupt")


def config_override_message(name: str, configured: dict, restored: dict) -> Optional[str]:
    """A sentence for the log when a restored table's config differs from the configured one
    (the YAML file or the constructor), naming the fields; None when they agree."""
    keys = sorted(set(configured) | set(restored))
    differing = [k for k in keys if protocol.json_dumps(configured.get(k)) != protocol.json_dumps(restored.get(k))]
    if not differing:
        return None
    details = "; ".join(f"{k}: checkpoint {protocol.json_dumps(restored.get(k))}, configured "
                        f"{protocol.json_dumps(configured.get(k))}" for k in differing)
    return (f"table {name!r}: the checkpoint's config replaces the configured one for "
            f"{', '.join(differing)} ({details})")


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
                    codec.encode_chunks(chunk_list[start:start + _CHUNKS_PER_RECORD], batch)
                    yield batch

            def item_batches():
                for (config, items, _) in snapshots:
                    for start in range(0, len(items), _ITEMS_PER_RECORD):
                        batch = replay_pb2.ItemBatch()
                        codec.encode_items([(config["name"], i) for i in items[start:start + _ITEMS_PER_RECORD]],
                                          batch, with_state=True)
                        yield batch

            files = {"chunks.bin": _write_records(os.path.join(tmp, "chunks.bin"), chunk_batches()),
                     "items.bin": _write_records(os.path.join(tmp, "items.bin"), item_batches())}
            manifest = {"format": FORMAT, "version": FORMAT_VERSION, "created": time.time(),
                        "num_chunks": len(chunk_list), "files": files, "tables": manifest_tables}
            manifest_bytes = protocol.json_dumps(manifest).encode()
            with open(os.path.join(tmp, MANIFEST), "wb") as f:
                f.write(manifest_bytes)
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
            f.write(_manifest_digest_line(manifest_bytes))
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

    def incomplete(self) -> List[str]:
        """Checkpoint directories without a DONE marker (writing them was interrupted), oldest first."""
        if not os.path.isdir(self.path):
            return []
        names = sorted(n for n in os.listdir(self.path) if n.startswith("ckpt-"))
        return [os.path.join(self.path, n) for n in names
                if not os.path.exists(os.path.join(self.path, n, DONE_MARKER))]

    def load_latest(self) -> Optional[list]:
        """The tables of the newest complete checkpoint that loads, or None when there is none.

        A corrupt checkpoint (see `load`) is skipped for the previous complete one, and
        incomplete ones are ignored; both with a warning in the log.

        Raises:
          CorruptCheckpointError: there are complete checkpoints but none of them loads (the
            message lists why for each).
          InvalidArgumentError: the newest checkpoint has another format or version.
        """
        complete = self.checkpoints()
        newest = complete[-1] if complete else ""
        for path in self.incomplete():
            if path > newest:
                log.warning("replay checkpoint %s is incomplete (no %s marker: writing it was "
                            "interrupted); ignored", path, DONE_MARKER)
        failures = []
        for path in reversed(complete):
            try:
                tables = self.load(path)
            except errors.DataLossError as e:
                failures.append(f"{os.path.basename(path)}: {e}")
                log.warning("replay checkpoint %s cannot be loaded (%s); trying the previous one", path, e)
                continue
            if failures:
                log.warning("replay server restored from the older checkpoint %s because %d newer one(s) "
                            "could not be loaded", path, len(failures))
            log.info("replay tables %s restored from checkpoint %s", [t.name for t in tables], path)
            return tables
        if failures:
            raise errors.CorruptCheckpointError(
                f"none of the {len(failures)} checkpoint(s) in {self.path} can be loaded: "
                f"{'; '.join(failures)}; restore the directory from a backup, or move it aside to "
                "start with empty tables")
        return None

    @staticmethod
    def load(path: str) -> list:
        """The tables of the checkpoint at `path`, rebuilt with `Table.from_checkpoint`, after
        verifying the checksum of every file and every field of the manifest.

        Raises:
          CorruptCheckpointError: a missing or unreadable file, a checksum that does not match,
            a missing or malformed manifest field, a truncated or corrupt record or chunk, or
            data that disagrees with the manifest (the message names the file and the field).
          InvalidArgumentError: another format or version.
        """
        from replay.table import Table

        manifest_bytes = _read(path, MANIFEST)
        verified = _verify_manifest(path, manifest_bytes)
        manifest = _parse_manifest(path, manifest_bytes)
        if manifest["version"] == FORMAT_VERSION and not verified:
            raise errors.CorruptCheckpointError(
                f"checkpoint {path}: {DONE_MARKER} is empty but a version {FORMAT_VERSION} checkpoint "
                f"holds the SHA-256 of {MANIFEST} there; the checkpoint is corrupt")
        if not verified:
            log.warning("replay checkpoint %s has format version %d, which carries no checksums: it "
                        "is loaded unverified (the next checkpoint written is verified)", path,
                        manifest["version"])
        data = {}
        for name in DATA_FILES:
            data[name] = _read(path, name)
            if verified:
                _verify_file(path, name, data[name], manifest["files"][name])
        where = f"checkpoint {path}: chunks.bin"
        chunks = {}
        try:
            for batch in _records(data.pop("chunks.bin"), where, replay_pb2.ChunkBatch):
                for chunk in codec.decode_chunks(batch):
                    if chunk.key in chunks:
                        raise errors.InvalidArgumentError(f"chunk {chunk.key} appears twice")
                    chunks[chunk.key] = chunk
        except errors.CorruptCheckpointError:
            raise
        except errors.ReplayError as e:
            raise errors.CorruptCheckpointError(f"{where}: {e}") from e
        if len(chunks) != manifest["num_chunks"]:
            raise errors.CorruptCheckpointError(
                f"{where} holds {len(chunks)} chunks but field num_chunks of {MANIFEST} says "
                f"{manifest['num_chunks']}")
        where = f"checkpoint {path}: items.bin"
        items_by_table: Dict[str, list] = {t["config"]["name"]: [] for t in manifest["tables"]}
        resolve = codec.resolver(chunks, f"checkpoint {path}")
        try:
            for batch in _records(data.pop("items.bin"), where, replay_pb2.ItemBatch):
                for name, item in codec.decode_items(batch, resolve, with_state=True):
                    table_items = items_by_table.get(name)
                    if table_items is None:
                        raise errors.InvalidArgumentError(
                            f"item {item.key} belongs to table {name!r}, which field tables of "
                            f"{MANIFEST} does not list")
                    table_items.append(item)
        except errors.CorruptCheckpointError:
            raise
        except errors.ReplayError as e:
            raise errors.CorruptCheckpointError(f"{where}: {e}") from e
        tables = []
        for i, entry in enumerate(manifest["tables"]):
            name = entry["config"]["name"]
            items = items_by_table[name]
            if len(items) != entry["num_items"]:
                raise errors.CorruptCheckpointError(
                    f"checkpoint {path}: items.bin holds {len(items)} items of table {name!r} but field "
                    f"tables[{i}].num_items of {MANIFEST} says {entry['num_items']}")
            try:
                tables.append(Table.from_checkpoint(entry["config"], items, entry["counters"]))
            except (errors.InvalidArgumentError, TypeError, ValueError, KeyError, AttributeError) as e:
                raise errors.CorruptCheckpointError(
                    f"checkpoint {path}: {MANIFEST}: field tables[{i}] (table {name!r}) cannot be "
                    f"restored: {e}") from e
        return tables
