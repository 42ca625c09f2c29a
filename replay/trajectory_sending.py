"""Sending a trajectory writer's chunks and items, and releasing chunks: closing a chunk, sending
every pending item whose chunks are closed (each chunk encoded once, with the first item that
needs it, adaptively compressed), the releases of chunks no item will reference again, and the
insert stream a writer opens only when it first sends.

Part of the trajectory writer (`replay.trajectory_writer`): `_ChunkSending` is one of the
`TrajectoryWriter`'s bases and works on the writer's state (see `TrajectoryWriter.__init__`);
the stream itself is `replay.insert_stream`, the encoding `replay.chunks`.
See docs/architecture.md, "Module map" and "Data path".
"""
from __future__ import annotations

import weakref
from typing import Optional

import numpy as np

from replay.chunks import encode_column, encode_raw_rows, encode_raw_step
from replay.codec import ChunkRow
from replay.insert_stream import InsertStream
from replay.trajectory_chunks import (
    _ADAPTIVE_MIN_BYTES,
    _INCOMPRESSIBLE_MAX_SKIP,
    _INCOMPRESSIBLE_SKIP,
    _INCOMPRESSIBLE_TRIES,
    _ChunkBuilder,
)


class _ChunkSending:
    """The trajectory writer's one role of sending: closes chunks, sends ready items with their
    chunks, releases chunks; a base of `TrajectoryWriter`, on whose state it works."""

    def _finalize(self, builder: _ChunkBuilder, send: bool = True) -> None:
        builder.closed = True
        if builder is self._open:
            self._open = None
        if builder.live_steps == 0 and builder.pending_items == 0:
            self._release(builder, [])  # never sent, and nothing can reference it any more
            return
        if send and self._pending:
            self._send_ready()

    def _send_ready(self) -> None:
        chunks, items = [], []
        releases, self._releases = self._releases, []
        pending = self._pending
        while pending:
            table, priority, key, wire_columns, builders = pending[0]
            if not builders[0].closed or (len(builders) > 1 and not all(b.closed for b in builders)):
                break  # waits for its chunk to close (chunk_length set)
            pending.popleft()
            for b in builders:
                if not b.sent:
                    b.sent = True
                    chunks.append(self._encode_chunk(b))
                    b.steps = b.columns = None
            items.append((table, key, priority, wire_columns))
            for b in builders:
                b.pending_items -= 1
                if b.pending_items == 0 and b.live_steps == 0 and b is not self._open:
                    self._release(b, releases)
        if items or releases:
            self._stream.send(chunks, items, releases)

    def _encode_chunk(self, builder: _ChunkBuilder) -> ChunkRow:
        steps = builder.steps
        one_step = columns = None
        if builder.columns is not None:
            columns = builder.columns
        elif len(steps) == 1:
            one_step = steps[0]  # its columns are views (leaf[np.newaxis]), made only if encoded
        else:
            columns = [np.stack(leaves) for leaves in zip(*steps)]
        encoded = []
        nbytes = 0
        hints = self._compress_hints
        for leaf in range(len(one_step) if one_step is not None else len(columns)):
            hint = hints[leaf]
            if hint[0] > 0:
                hint[0] -= 1
                if one_step is not None and not self._delta:
                    data = encode_raw_step(one_step[leaf], self._leaf_dtype_strs[leaf])  # append checked it
                elif builder.steps is None and not self._delta:  # a batch's rows (extend checked them)
                    data = encode_raw_rows(columns[leaf], self._leaf_dtype_strs[leaf])
                else:
                    column = columns[leaf] if one_step is None else one_step[leaf][np.newaxis]
                    data = encode_column(column, self._delta, compress=False)
            else:
                column = columns[leaf] if one_step is None else one_step[leaf][np.newaxis]
                data = encode_column(column, self._delta, compress=True)
                if data.compressed or column.nbytes < _ADAPTIVE_MIN_BYTES:
                    hint[1], hint[2] = 0, _INCOMPRESSIBLE_SKIP
                else:
                    hint[1] += 1
                    if hint[1] >= _INCOMPRESSIBLE_TRIES:
                        # the next failure (one try after the skip) skips again, twice as long
                        hint[0], hint[1] = hint[2], _INCOMPRESSIBLE_TRIES - 1
                        hint[2] = min(2 * hint[2], _INCOMPRESSIBLE_MAX_SKIP)
            encoded.append(data)
            nbytes += len(data.data)
        return tuple.__new__(ChunkRow, (builder.key, builder.episode_id, builder.start_index,
                                        1 if one_step is not None else len(columns[0]), encoded, nbytes))

    def _maybe_release(self, builder: _ChunkBuilder) -> None:
        if builder.pending_items == 0:
            self._release(builder, self._releases)

    def _send_releases(self) -> None:
        """Sends the deferred chunk releases that no item carried out."""
        if self._releases:
            releases, self._releases = self._releases, []
            self._stream.send((), (), releases)

    def _release(self, builder: _ChunkBuilder, releases: list) -> None:
        if builder.released:
            return
        builder.released = True
        if builder.sent:
            releases.append(builder.key)
        builder.steps = builder.columns = None

    def _close_referenced_chunks(self) -> None:
        """Sends every created item (closing the open chunk if items wait for it) and the
        deferred releases: what `flush`, `end_episode` and `close` start with."""
        if self._open is not None and self._open.pending_items > 0:
            self._finalize(self._open)
        elif self._pending:
            self._send_ready()
        self._send_releases()


class _StreamOnFirstUse:
    """Stands for a writer's InsertStream until first used, then makes it and puts it in the
    writer's place (so a writer built around anything with a `max_num_keep_alive_refs`, as
    Reverb's one-argument constructor allows, needs a client only once it writes)."""

    def __init__(self, writer: "weakref.ref", client, max_in_flight_items: int, timeout: Optional[float]):
        self.__dict__["_args"] = (writer, client, max_in_flight_items, timeout)

    def _real(self) -> InsertStream:
        writer, client, max_in_flight_items, timeout = self.__dict__["_args"]
        stream = InsertStream(client, max_in_flight_items, timeout=timeout)
        owner = writer()
        if owner is not None:
            owner._stream = stream  # noqa: SLF001 - the writer's own attribute
        self.__dict__["_stream"] = stream
        return stream

    def __getattr__(self, name: str):
        stream = self.__dict__.get("_stream") or self._real()
        return getattr(stream, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.__dict__.get("_stream") or self._real(), name, value)


