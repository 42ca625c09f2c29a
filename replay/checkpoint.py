"""Checkpoints of a replay server's whole state, written atomically to a directory.

This is how a replay server survives restarts: `Checkpointer.save(tables)`
snapshots every table (`Table.checkpoint()`: config, items in insertion order with priorities,
times_sampled and inserted_at, counters including the rate limiter's) and the chunks the items
reference; `load_latest()` rebuilds the tables with `Table.from_checkpoint` (which documents the
rate-limiter restore rule: a restored table never leaves samplers blocked forever).
See docs/architecture.md, "Checkpoints"; the layout of one checkpoint's files is
`replay.checkpoint_files`'s.

A server with a chunk directory (`replay.disk_chunk_store`) saves with
`save(tables, reference_chunk_files=True)`: the checkpoint links the chunk files instead of
copying the chunk bytes (format version 3, `replay.checkpoint_chunk_refs`), and falls back to
copying them (version 2, with a line in the log) where the files cannot be linked there (the
checkpoint directory on another filesystem, no O_TMPFILE). `load_latest(map_chunk_files=True)`
then maps those files instead of reading them into memory. Pruning a checkpoint whose files a
running server maps unlinks only their names: the data lives while mapped, and every later
save of that server links the files again (or copies the bytes of a file that lost every name).

A checkpoint is written under <root>/.tmp-<random>, renamed into place, then DONE is created, so a crash
at any point leaves either a complete checkpoint or one that is ignored. Each table's snapshot
is consistent; tables are snapshotted one after another.

Loading verifies every checksum and every manifest field before building anything: a flipped
bit or a malformed field raises `CorruptCheckpointError` naming the file and the field, and
`load_latest` then falls back to the previous complete checkpoint (with a warning in the log).
Checkpoints of format version 1 (written before checksums existed) still load, with a warning
that they are unverified; the next save writes a verified one.

Restoring into declared tables (`Checkpointer.load_latest(declared=...)`, which is what a server
given tables and a checkpointer does) follows `RESTORE_RULE`: the declared settings win, the
checkpoint supplies the contents. A restore logs its progress (items and chunks loaded), logs
one line per table whose settings changed (old -> new), and ends within `restore_timeout` with
`DeadlineExceededError`; it only reads the checkpoint, so a failed or timed-out restore leaves
the checkpoint as it was and builds nothing that is served.
"""
from __future__ import annotations

import datetime
import logging
import math
import os
import shutil
import time
import uuid
from typing import Dict, List, Mapping, Optional, Sequence

from replay import codec, errors, protocol, segment_files
from replay.checkpoint_chunk_refs import load_referenced_chunks, write_referencing_data_files
from replay.checkpoint_files import (CHUNK_REFS, DONE_MARKER, FORMAT, FORMAT_VERSION, MANIFEST, REFERENCING_VERSION,
                                     data_files, fsync_dir, manifest_digest_line, parse_manifest, read_as_corrupt,
                                     read_data_file, read_file, read_records, verify_manifest, write_data_files)
from replay.proto import replay_pb2

log = logging.getLogger(__name__)

# Seconds between a restore's progress lines in the log (besides its first and last line).
PROGRESS_EVERY_S = 5.0
# The settings a declared table keeps when a checkpoint is restored into it (`RESTORE_RULE`).
DECLARED_FIELDS = ("max_size", "sampler", "remover", "rate_limiter", "max_times_sampled", "extensions",
                   "signature")

RESTORE_RULE = """\
Restoring a checkpoint into declared tables (a server given tables and a checkpointer, or
`Checkpointer.load_latest(declared=...)`): for a table both declared and in the checkpoint, the
declared settings win and the checkpoint supplies the contents.

- The table is built from the declared config: max_size, sampler, remover, rate limiter,
  max_times_sampled, extensions and signature are the declared ones; the checkpoint's are dropped,
  except the signature of a table declared without one, which is the checkpoint's (it describes
  the restored items).
- The checkpoint supplies the items (in insertion order, with priorities, times_sampled and
  inserted_at) and the table counters (num_inserts, num_samples, ...).
- With a declared max_times_sampled > 0, restored items already sampled that many times are
  deleted (counted in num_deletes), as sampling would have deleted them under that setting.
- If more items remain than the declared max_size, the declared remover evicts the excess
  (counted in num_evictions); the declared sampler and remover index the restored priorities.
- The declared rate limiter is rebased on the restored item count as if those items had just been
  inserted into an empty table (`Table.from_checkpoint`); the checkpoint's limiter and its cursor
  are not restored, so a limiter saved while blocked, or one of other settings, never blocks
  inserts or samples after the restore.
- An extension keeps its saved state only when its declared config equals the saved one and so do
  those of every extension before it; otherwise it starts from the restored items (it sees them
  as inserts).
- Items that do not fit a declared signature fail the restore with SignatureMismatchError (an
  InvalidArgumentError; nothing is served, the checkpoint is unchanged).
- A table only in the checkpoint is not restored (a warning in the log); a table only declared
  starts empty.

One log line per table whose settings changed names each field as checkpoint -> declared, and
what the change did to the items (evicted, deleted) and the rate limiter's rebased counts.
"""


class _RestoreClock:
    """The deadline and progress log of one restore (shared by the checkpoints it tries)."""

    def __init__(self, timeout: Optional[float]):
        self.timeout = timeout
        self.started = time.monotonic()
        self.deadline = None if timeout is None else self.started + timeout
        self._last_report = self.started

    def check(self, path: str, doing: str) -> None:
        """Raises DeadlineExceededError once the timeout has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise errors.DeadlineExceededError(
                f"restoring checkpoint {path} ran past its timeout of {self.timeout:g} s (stopped while "
                f"{doing}); nothing was restored and the checkpoint is unchanged; give the restore more "
                "time (replay-server --restore-timeout, Checkpointer(restore_timeout=...))")

    def progress(self, path: str, message: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_report >= PROGRESS_EVERY_S:
            self._last_report = now
            log.info("restoring checkpoint %s: %s (%.1f s)", path, message, now - self.started)


class Checkpointer:
    """Writes and finds checkpoints under the directory `path`.

    Args:
      path: the root directory (created when missing).
      keep: how many complete checkpoints to keep; older ones are deleted after a save.
      restore_timeout: seconds `load_latest` may take (for every checkpoint it tries together)
        before it raises DeadlineExceededError; None waits as long as the restore takes.

    Raises:
      InvalidArgumentError: keep < 1, or a restore_timeout that is not a positive number.
    """

    def __init__(self, path: str, keep: int = 2, restore_timeout: Optional[float] = None):
        if keep < 1:
            raise errors.InvalidArgumentError(f"keep must be >= 1, got {keep}")
        if restore_timeout is not None and (
                isinstance(restore_timeout, bool) or not isinstance(restore_timeout, (int, float))
                or not restore_timeout > 0 or math.isinf(restore_timeout)):
            raise errors.InvalidArgumentError(
                f"restore_timeout must be a positive number of seconds or None, got {restore_timeout!r}")
        self.path = os.path.abspath(path)
        self.keep = int(keep)
        self.restore_timeout = None if restore_timeout is None else float(restore_timeout)
        self._said_copying = False

    def save(self, tables: Sequence, reference_chunk_files: bool = False) -> str:
        """Writes a checkpoint of `tables` and returns its directory. With
        `reference_chunk_files` (a server with a chunk directory), the checkpoint links the
        chunk files instead of copying the chunk bytes, where it can (see the module docstring).

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
            manifest = {"format": FORMAT, "version": FORMAT_VERSION, "created": time.time(),
                        "num_chunks": len(chunk_list)}
            referenced = None
            if reference_chunk_files:
                referenced = self._write_referencing(tmp, chunk_list, snapshots)
            if referenced is None:
                manifest["files"] = write_data_files(tmp, chunk_list, snapshots)
            else:
                manifest["version"] = REFERENCING_VERSION
                manifest["files"], manifest["chunk_files"] = referenced
            manifest["tables"] = manifest_tables
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
        fsync_dir(self.path)
        with open(os.path.join(final, DONE_MARKER), "w") as f:
            f.write(manifest_digest_line(manifest_bytes))
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(final)
        self._prune()
        return final

    def _write_referencing(self, tmp: str, chunk_list: list, snapshots: list):
        """The referencing data files written into `tmp` ("files" and "chunk_files" of the
        manifest), or None (with a line in the log) where the chunk files cannot be linked
        there: `tmp` is then emptied for the copying format."""
        try:
            return write_referencing_data_files(tmp, chunk_list, snapshots)
        except segment_files.LinkUnavailable as e:
            shutil.rmtree(tmp)
            os.makedirs(tmp)
            level = logging.INFO if self._said_copying else logging.WARNING
            self._said_copying = True
            log.log(level, "replay checkpoint in %s copies the chunk data instead of linking the chunk files "
                    "(%s); keep checkpoints on the chunk directory's filesystem to save without copying",
                    self.path, e)
            return None

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

    def load_latest(self, declared: Optional[Mapping[str, dict]] = None,
                    map_chunk_files: bool = False) -> Optional[list]:
        """The tables of the newest complete checkpoint that loads, or None when there is none.

        A corrupt checkpoint (see `load`) is skipped for the previous complete one, and
        incomplete ones are ignored; both with a warning in the log. With `declared` (table name
        -> `Table.config()` of the tables to restore into), tables are rebuilt by `RESTORE_RULE`
        (the declared settings win). The whole call, every checkpoint it tries included, ends
        within `restore_timeout`. It only reads the checkpoints. With `map_chunk_files` (a
        server with a chunk directory), the chunks of a checkpoint that references chunk files
        are views into those files, mapped read-only, instead of copies in memory.

        Raises:
          CorruptCheckpointError: there are complete checkpoints but none of them loads (the
            message lists why for each).
          DeadlineExceededError: the restore ran past `restore_timeout`.
          InvalidArgumentError: the newest checkpoint has another format or version, or its items
            do not fit a declared signature.
        """
        clock = _RestoreClock(self.restore_timeout)
        complete = self.checkpoints()
        newest = complete[-1] if complete else ""
        for path in self.incomplete():
            if path > newest:
                log.warning("replay checkpoint %s is incomplete (no %s marker: writing it was "
                            "interrupted); ignored", path, DONE_MARKER)
        failures = []
        for path in reversed(complete):
            try:
                tables = _load(path, declared, clock, map_chunk_files)
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
    def load(path: str, declared: Optional[Mapping[str, dict]] = None,
             timeout: Optional[float] = None, map_chunk_files: bool = False) -> list:
        """The tables of the checkpoint at `path`, rebuilt with `Table.from_checkpoint`, after
        verifying the checksum of every file and every field of the manifest. With `declared`
        (table name -> `Table.config()`), the tables are rebuilt by `RESTORE_RULE` and tables
        the checkpoint holds but `declared` lacks are left out (with a warning). Progress goes
        to the log (items and chunks loaded). `map_chunk_files` as for `load_latest`.

        Raises:
          CorruptCheckpointError: a missing or unreadable file (a chunk file too), a checksum
            that does not match (a column's CRC32 in a chunk file too), a chunk file shorter
            than the manifest says,
            a missing or malformed manifest field, a truncated or corrupt record or chunk, or
            data that disagrees with the manifest (the message names the file and the field).
          DeadlineExceededError: loading ran past `timeout` seconds.
          InvalidArgumentError: another format or version, or items that do not fit a declared
            signature.
        """
        return _load(path, declared, _RestoreClock(timeout), map_chunk_files)


def _load(path: str, declared: Optional[Mapping[str, dict]], clock: _RestoreClock,
          map_chunk_files: bool = False) -> list:
    """`Checkpointer.load` under a restore clock shared by the checkpoints one restore tries."""
    manifest_bytes = read_file(path, MANIFEST)
    verified = verify_manifest(path, manifest_bytes)
    manifest = parse_manifest(path, manifest_bytes)
    if manifest["version"] in (FORMAT_VERSION, REFERENCING_VERSION) and not verified:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {DONE_MARKER} is empty but a version {manifest['version']} checkpoint "
            f"holds the SHA-256 of {MANIFEST} there; the checkpoint is corrupt")
    if not verified:
        log.warning("replay checkpoint %s has format version %d, which carries no checksums: it "
                    "is loaded unverified (the next checkpoint written is verified)", path,
                    manifest["version"])
    num_chunks = manifest["num_chunks"]
    num_items = sum(entry["num_items"] for entry in manifest["tables"])
    clock.progress(path, f"{num_items} items and {num_chunks} chunks of tables "
                         f"{[t['config']['name'] for t in manifest['tables']]} to load", force=True)
    data = {}
    for name in data_files(manifest["version"]):
        data[name] = read_data_file(path, name, manifest["files"][name] if verified else None, clock)
    if manifest["version"] == REFERENCING_VERSION:
        chunks = load_referenced_chunks(path, manifest, data.pop("chunks.bin"), data.pop(CHUNK_REFS), clock,
                                        map_chunk_files)
    else:
        chunks = _load_copied_chunks(path, data.pop("chunks.bin"), clock, num_chunks)
    if len(chunks) != num_chunks:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: chunks.bin holds {len(chunks)} chunks but field num_chunks of {MANIFEST} "
            f"says {num_chunks}")
    where = f"checkpoint {path}: items.bin"
    items_by_table: Dict[str, list] = {t["config"]["name"]: [] for t in manifest["tables"]}
    resolve = codec.resolver(chunks, f"checkpoint {path}")
    loaded = [0]

    def before_item_record():
        clock.check(path, f"loading items ({loaded[0]} of {num_items} loaded)")
        clock.progress(path, f"{loaded[0]} of {num_items} items loaded")

    with read_as_corrupt(where):
        for batch in read_records(data.pop("items.bin"), where, replay_pb2.ItemBatch, before_item_record):
            for name, item in codec.decode_items(batch, resolve, with_state=True):
                table_items = items_by_table.get(name)
                if table_items is None:
                    raise errors.InvalidArgumentError(
                        f"item {item.key} belongs to table {name!r}, which field tables of "
                        f"{MANIFEST} does not list")
                table_items.append(item)
                loaded[0] += 1
    tables = []
    for i, entry in enumerate(manifest["tables"]):
        name = entry["config"]["name"]
        items = items_by_table[name]
        if len(items) != entry["num_items"]:
            raise errors.CorruptCheckpointError(
                f"checkpoint {path}: items.bin holds {len(items)} items of table {name!r} but field "
                f"tables[{i}].num_items of {MANIFEST} says {entry['num_items']}")
    for i, entry in enumerate(manifest["tables"]):
        name = entry["config"]["name"]
        clock.check(path, f"building table {name!r}")
        total = len(items_by_table[name])

        def progress(checked, name=name, total=total):
            clock.check(path, f"building table {name!r} ({checked} of {total} items checked)")
            clock.progress(path, f"table {name!r}: {checked} of {total} items checked")

        if declared is None:
            tables.append(_saved_table(path, i, entry, items_by_table[name], progress))
        elif name in declared:
            tables.append(_declared_table(path, i, entry, items_by_table[name], declared[name], progress))
        else:
            log.warning("checkpoint %s: table %r is not declared; its %d items are not restored", path, name,
                        entry["num_items"])
    clock.check(path, "building the tables")
    clock.progress(path, f"restored {sum(t.size for t in tables)} items and {num_chunks} chunks into tables "
                         f"{[t.name for t in tables]}", force=True)
    return tables


def _load_copied_chunks(path: str, records: bytes, clock: _RestoreClock, num_chunks: int) -> Dict[int, object]:
    """The chunks of chunks.bin of a checkpoint that copies the chunk bytes (versions 1 and 2)."""
    where = f"checkpoint {path}: chunks.bin"
    chunks = {}

    def before_chunk_record():
        clock.check(path, f"loading chunks ({len(chunks)} of {num_chunks} loaded)")
        clock.progress(path, f"{len(chunks)} of {num_chunks} chunks loaded")

    with read_as_corrupt(where):
        for batch in read_records(records, where, replay_pb2.ChunkBatch, before_chunk_record):
            for chunk in codec.decode_chunks(batch):
                if chunk.key in chunks:
                    raise errors.InvalidArgumentError(f"chunk {chunk.key} appears twice")
                chunks[chunk.key] = chunk
    return chunks


def _saved_table(path: str, index: int, entry: dict, items: list, progress):
    """The table as the checkpoint saved it (its own config)."""
    from replay.table import Table

    try:
        return Table.from_checkpoint(entry["config"], items, entry["counters"], progress)
    except (errors.InvalidArgumentError, TypeError, ValueError, KeyError, AttributeError) as e:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {MANIFEST}: field tables[{index}] (table {entry['config']['name']!r}) "
            f"cannot be restored: {e}") from e


def _declared_table(path: str, index: int, entry: dict, items: list, declared: dict, progress):
    """The checkpoint's contents in a table of the declared config, by `RESTORE_RULE`; logs one
    line naming what changed."""
    from replay.table import Table

    saved, name = entry["config"], entry["config"]["name"]
    try:  # a malformed saved config is a corrupt checkpoint even though the declared one is used
        Table.from_config(saved)
    except (errors.InvalidArgumentError, TypeError, ValueError, KeyError, AttributeError) as e:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {MANIFEST}: field tables[{index}] (table {name!r}) cannot be "
            f"restored: {e}") from e
    config = dict(declared, name=name)
    if config.get("signature") is None:  # declared without one: the data's own, as saved
        config["signature"] = saved.get("signature")
    try:
        table = Table.from_config(config)
    except errors.InvalidArgumentError as e:
        raise errors.InvalidArgumentError(f"the declared table {name!r} cannot be rebuilt: {e}") from e
    try:
        counters = dict(entry["counters"])
        max_times = table.max_times_sampled
        deleted = 0
        if max_times:
            kept = [item for item in items if item.times_sampled < max_times]
            deleted = len(items) - len(kept)
            items = kept
            counters["num_deletes"] = int(counters.get("num_deletes", 0)) + deleted
        states = []
        for declared_ext, saved_ext, state in zip(config.get("extensions") or [], saved.get("extensions") or [],
                                                  counters.get("extensions") or []):
            if protocol.json_dumps(declared_ext) != protocol.json_dumps(saved_ext):
                break
            states.append(state)
        counters["extensions"] = states
    except (TypeError, ValueError, AttributeError) as e:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {MANIFEST}: field tables[{index}] (table {name!r}) cannot be "
            f"restored: {e}") from e
    try:
        table.load_checkpoint(items, counters, progress)
    except errors.SignatureMismatchError as e:
        raise errors.SignatureMismatchError(
            f"checkpoint {path}: the items of table {name!r} do not fit its declared settings: {e}; "
            "declare the table as the checkpoint has it, or start without the checkpoint") from e
    except errors.InvalidArgumentError as e:  # a repeated key, a bad priority: not the declaration's
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: items.bin: the items of table {name!r} cannot be restored: {e}") from e
    changed = [f"{field} {protocol.json_dumps(saved.get(field))} -> {protocol.json_dumps(config.get(field))}"
               for field in DECLARED_FIELDS
               if protocol.json_dumps(saved.get(field)) != protocol.json_dumps(config.get(field))]
    if changed:
        effects = []
        evicted = len(items) - table.size
        if deleted:
            effects.append(f"{deleted} items sampled >= {max_times} times deleted")
        if evicted:
            effects.append(f"{evicted} items evicted to fit max_size {table.max_size}")
        limiter = table.info().rate_limiter_info
        effects.append(f"{table.size} items restored; rate limiter rebased to {limiter.insert_count} inserts, "
                       f"{limiter.sample_count} samples")
        log.warning("table %r restored with its declared settings, not the checkpoint's (checkpoint -> "
                    "declared): %s; %s", name, "; ".join(changed), "; ".join(effects))
    return table
