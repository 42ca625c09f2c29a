"""The file format of one replay checkpoint: its data records, its manifest and the DONE marker
that seals it, written, and read back with every checksum and manifest field verified.

Part of the replay checkpoints (replay/checkpoint.py): `Checkpointer` names, writes (under a
temporary name, then renamed), finds and prunes checkpoint directories, and builds tables from
what is read here; this module knows files, records and manifest fields, not tables. A
malformed file or field raises `CorruptCheckpointError` naming the file and the field.

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

That is format version 2, which copies the chunk bytes into chunks.bin. Version 3 (a server
with a chunk directory) references the chunk files instead: its chunks.bin records carry no
column bytes, and chunk_refs.bin and the chunk files hold them; `replay.checkpoint_chunk_refs`
writes and reads those, the manifest's fields of both versions are checked here.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
from typing import Any, Dict, Optional, Sequence

from replay import codec, errors
from replay.proto import replay_pb2

FORMAT = "replay-checkpoint"
FORMAT_VERSION = 2  # the chunk bytes copied into chunks.bin
REFERENCING_VERSION = 3  # the chunk files referenced (replay.checkpoint_chunk_refs)
# Written before checkpoints carried checksums: loaded with a warning that they are unverified.
_UNVERIFIED_VERSIONS = (1,)
DONE_MARKER = "DONE"
MANIFEST = "manifest.json"
DATA_FILES = ("chunks.bin", "items.bin")
CHUNK_REFS = "chunk_refs.bin"
CHUNK_FILE_PREFIX = "chunk-file-"  # the chunk files of a referencing checkpoint
_VERIFIED_VERSIONS = (FORMAT_VERSION, REFERENCING_VERSION)
_TABLE_COUNTERS = ("num_inserts", "num_samples", "num_deletes", "num_evictions", "num_updates",
                   "num_unique_samples", "num_deleted_episodes")
_RECORD_HEADER = struct.Struct("<Q")
_CHUNKS_PER_RECORD = 512
_ITEMS_PER_RECORD = 4096
# Data files are read and hashed in blocks of this size, so a restore's timeout and progress are
# looked at between blocks, not once per multi-gigabyte file.
_READ_BLOCK_BYTES = 16 << 20


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


def data_files(version: int) -> tuple:
    """The data files (listed with size and SHA-256 in the manifest) of a checkpoint of `version`."""
    return DATA_FILES + (CHUNK_REFS,) if version == REFERENCING_VERSION else DATA_FILES


def write_chunk_records(path: str, chunks: Sequence, with_column_data: bool = True) -> dict:
    """Writes chunks.bin at `path`: `chunks` (each once), with their column bytes or (for a
    referencing checkpoint) without; returns {"size", "sha256"} of the file.

    Raises:
      OSError: the file cannot be written.
    """
    chunk_list = list(chunks)

    def chunk_batches():
        for start in range(0, len(chunk_list), _CHUNKS_PER_RECORD):
            batch = replay_pb2.ChunkBatch()
            codec.encode_chunks(chunk_list[start:start + _CHUNKS_PER_RECORD], batch,
                                None if with_column_data else [])
            yield batch

    return _write_records(path, chunk_batches())


def write_item_records(path: str, snapshots: Sequence) -> dict:
    """Writes items.bin at `path`: the items of `snapshots` (the tables' `Table.checkpoint()`
    output); returns {"size", "sha256"} of the file.

    Raises:
      OSError: the file cannot be written.
    """

    def item_batches():
        for (config, items, _) in snapshots:
            for start in range(0, len(items), _ITEMS_PER_RECORD):
                batch = replay_pb2.ItemBatch()
                codec.encode_items([(config["name"], i) for i in items[start:start + _ITEMS_PER_RECORD]],
                                  batch, with_state=True)
                yield batch

    return _write_records(path, item_batches())


def write_data_files(directory: str, chunks: Sequence, snapshots: Sequence) -> Dict[str, dict]:
    """Writes chunks.bin (`chunks`, each once, with their bytes) and items.bin (the items of
    `snapshots`) into `directory`; returns the manifest's "files" entry ({name: {"size",
    "sha256"}}).

    Raises:
      OSError: a file cannot be written.
    """
    return {"chunks.bin": write_chunk_records(os.path.join(directory, "chunks.bin"), chunks),
            "items.bin": write_item_records(os.path.join(directory, "items.bin"), snapshots)}


@contextlib.contextmanager
def read_as_corrupt(where: str):
    """Turns a replay error raised while reading `where` into CorruptCheckpointError (a
    corrupt checkpoint and a restore past its deadline pass through as they are)."""
    try:
        yield
    except (errors.CorruptCheckpointError, errors.DeadlineExceededError):
        raise
    except errors.ReplayError as e:
        raise errors.CorruptCheckpointError(f"{where}: {e}") from e


def read_records(data: bytes, where: str, message_type, on_record=None):
    """The records of a data file; `on_record()` runs before each (deadline and progress).

    Raises:
      CorruptCheckpointError: a truncated or unparsable record (naming `where` and the byte).
    """
    offset = 0
    while offset < len(data):
        if on_record is not None:
            on_record()
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


def read_file(path: str, name: str) -> bytes:
    """The whole file `name` of the checkpoint at `path` (the manifest, DONE).

    Raises:
      CorruptCheckpointError: the file cannot be read.
    """
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


def parse_manifest(path: str, raw: bytes) -> dict:
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
    if fmt != FORMAT or (version not in _VERIFIED_VERSIONS and version not in _UNVERIFIED_VERSIONS):
        raise errors.InvalidArgumentError(
            f"checkpoint {path}: format {fmt!r} version {version!r} is not {FORMAT!r} version "
            f"{FORMAT_VERSION} or {REFERENCING_VERSION}; load it with the replay version that wrote it")
    fields.get(manifest, "created", "created", "number", optional=True)
    fields.get(manifest, "num_chunks", "num_chunks", "count")
    if version in _VERIFIED_VERSIONS:
        files = fields.get(manifest, "files", "files", "dict")
        for name in data_files(version):
            entry = fields.get(files, name, f"files.{name}", "dict")
            fields.get(entry, "size", f"files.{name}.size", "count")
            digest = fields.get(entry, "sha256", f"files.{name}.sha256", "str")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                fields.fail(f"files.{name}.sha256", f"must be 64 lowercase hex digits, got {digest!r:.80}")
    if version == REFERENCING_VERSION:
        chunk_files = fields.get(manifest, "chunk_files", "chunk_files", "list")
        seen = set()
        for i, entry in enumerate(chunk_files):
            label = f"chunk_files[{i}]"
            if not isinstance(entry, dict):
                fields.fail(label, f"must be an object, got {entry!r:.80}")
            name = fields.get(entry, "name", f"{label}.name", "str")
            if (not name.startswith(CHUNK_FILE_PREFIX) or os.sep in name or name in seen
                    or (os.altsep and os.altsep in name)):
                fields.fail(f"{label}.name", f"must be a new file name starting with {CHUNK_FILE_PREFIX!r}, "
                                             f"got {name!r:.80}")
            seen.add(name)
            if fields.get(entry, "min_size", f"{label}.min_size", "count") == 0:
                fields.fail(f"{label}.min_size", "must be positive (a chunk file holds referenced bytes)")
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


def manifest_digest_line(manifest_bytes: bytes) -> str:
    """The DONE marker's content: `sha256sum` output for manifest.json."""
    return f"{hashlib.sha256(manifest_bytes).hexdigest()}  {MANIFEST}\n"


def verify_manifest(path: str, manifest_bytes: bytes) -> bool:
    """Checks manifest.json against the digest in DONE; False for an empty DONE (a checkpoint
    written before checksums existed).

    Raises:
      CorruptCheckpointError: DONE is unreadable or malformed, or the digest differs.
    """
    done = read_file(path, DONE_MARKER)
    if not done:
        return False
    try:
        text = done.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    if text != manifest_digest_line(manifest_bytes):
        digest, _, name = text.strip().partition("  ")
        if name != MANIFEST or len(digest) != 64:
            raise errors.CorruptCheckpointError(
                f"checkpoint {path}: {DONE_MARKER} does not hold the SHA-256 of {MANIFEST} "
                f"({done[:100]!r}); the checkpoint is corrupt")
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {MANIFEST} does not match the SHA-256 in {DONE_MARKER} (the file "
            "changed after it was written); the checkpoint is corrupt")
    return True


def read_data_file(path: str, name: str, expected: Optional[dict], clock) -> bytes:
    """A data file, read and hashed block by block (checking the deadline between blocks) and
    verified against `expected` ({"size", "sha256"}; None for an unverified checkpoint).
    `clock` is the restore's deadline and progress log (`check(path, doing)`,
    `progress(path, message)`, as `replay.checkpoint`'s restore clock has them).

    Raises:
      CorruptCheckpointError: the file cannot be read, or its size or digest differ.
      DeadlineExceededError: the restore's timeout passed.
    """
    digest = hashlib.sha256()
    blocks = []
    read = 0
    try:
        with open(os.path.join(path, name), "rb") as f:
            total = os.fstat(f.fileno()).st_size
            while True:
                clock.check(path, f"reading {name} ({read >> 20} of {total >> 20} MB read)")
                block = f.read(_READ_BLOCK_BYTES)
                if not block:
                    break
                digest.update(block)
                blocks.append(block)
                read += len(block)
                clock.progress(path, f"{name}: {read >> 20} of {total >> 20} MB read and hashed")
    except errors.DeadlineExceededError:  # a TimeoutError, so an OSError: not the file's fault
        raise
    except OSError as e:
        raise errors.CorruptCheckpointError(f"checkpoint {path}: cannot read {name}: {e}") from e
    data = b"".join(blocks)
    if expected is not None:
        _verify_file(path, name, data, expected, digest.hexdigest())
    return data


def _verify_file(path: str, name: str, data: bytes, expected: dict, sha256: Optional[str] = None) -> None:
    if len(data) != expected["size"]:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {name} holds {len(data)} bytes but {MANIFEST} says {expected['size']} "
            "(truncated or replaced); the checkpoint is corrupt")
    if (sha256 or hashlib.sha256(data).hexdigest()) != expected["sha256"]:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {name} does not match its SHA-256 in {MANIFEST} (corrupt file); the "
            "checkpoint is corrupt")


def fsync_dir(path: str) -> None:
    """Flushes the directory's entries (a rename or a new file in it) to disk, as far as the
    platform allows; never raises."""
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
