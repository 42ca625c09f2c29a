"""TrajectoryWriter: writes steps to a replay server and builds items from any kept-alive cells.

This is how rollout workers put experience into the replay service, with the API and semantics
of Reverb 0.14's `TrajectoryWriter` (`replay.reverb.TrajectoryWriter` is this class). Each
`append` adds one step (a nest of arrays; a None leaf leaves that column out of the step, and
`partial_step=True` builds a step over several calls). `history` gives, column by column, a
`_ColumnHistory` indexed like a list of every step since the episode began (non-negative indices
count from its start, negative ones from its end), of which only the last `num_keep_alive_refs`
steps can still be referenced; an item is any slices of them (`writer.history['obs'][-3:]`),
for any table, overlapping other items. Steps are grouped into chunks (column-wise,
lz4-compressed, see `replay.chunks`); every chunk is sent once, with the first item that needs
it, however many items and tables reference it.

Sending is asynchronous (`replay.insert_stream.InsertStream`): items and chunks go into a
queue that a gRPC request iterator drains, many per message, while a background thread counts
the server's batched acks. A call blocks only when the stream's window of unacknowledged items
(at most `max_in_flight_items`) or bytes is full; the window falls to a few items while a
table's rate limiter holds the writer's inserts back, so the writer waits in `append` and
`create_item` instead of running ahead of the limiter. `flush` waits for acks. If the stream
fails (bad item, server gone), the next call raises the error. With `validate_items`,
`create_item` checks the item against the table's signature (fetched once per client with
`server_info`), as Reverb's writer does.

Chunking: with `chunk_length=None` a chunk is closed as soon as an item references one of its
steps (items go out immediately, chunks hold the steps since the previous chunk). With a
`chunk_length`, chunks are closed every `chunk_length` steps (better compression) and items
referencing the open chunk wait until it closes, at `flush` or at `end_episode`. Columns are
lz4-compressed, except that a leaf whose data stopped compressing (random or pre-compressed
data) is stored raw for a while before lz4 is tried again. A chunk holds every column that had
a value by its first step (zeros where a step left a column out, which no item can reference).

Its parts: the writer's state, its construction, the stream's window sizing, `history`,
`flush`, `end_episode` and `close` are here; each of its other roles is one base class in a
module of its own: appending steps one at a time and the columns' layout
(`replay.trajectory_steps`), appending batches of steps (`replay.trajectory_batches`), creating
items (`replay.trajectory_items`), sending chunks and items and releasing chunks
(`replay.trajectory_sending`). Below them: the references it hands out
(`replay.trajectory_columns`), its chunk builder and compression constants
(`replay.trajectory_chunks`), the signature check (`replay.item_signature_check`) and the
comparisons of steps (`replay.step_structure`).
"""
from __future__ import annotations

import collections
import datetime
import os
import random
import weakref
from typing import Any, Deque, Dict, List, Optional, Tuple

import numpy as np
import tree

from replay import errors
from replay.insert_stream import InsertStream  # noqa: F401 - its old home, still importable from here
from replay.trajectory_batches import _BatchAppending
from replay.trajectory_chunks import _ChunkBuilder
from replay.trajectory_columns import CellRef, TrajectoryColumn, _ColumnHistory  # noqa: F401 - re-exported
from replay.trajectory_items import _ItemCreation
from replay.trajectory_sending import _ChunkSending, _StreamOnFirstUse
from replay.trajectory_steps import _StepAppending

# Without an explicit max_in_flight_items, a writer lets up to _AUTO_IN_FLIGHT_BYTES of steps be
# unacknowledged, counted in steps of its first step's size, within these bounds. Small steps
# need many items in flight to keep a server busy while the writer fills the next message
# (400 B steps: 10-15% more items/s with 4,000 than with 1,000, from four writers); large ones do
# not. More than four full messages (4,096 items) only wait in the server while many writers
# share its CPU, and its last messages are inserted by the server alone, after the writers
# stopped: sixteen writers of 100 B steps, 16,000 in flight each: 59-60k items/s, 86% of the
# items still unacknowledged when they stopped writing; 4,000 each: 67k; one and four writers:
# the same either way.
_AUTO_IN_FLIGHT_BYTES = 4 * 1024 * 1024
_MIN_AUTO_IN_FLIGHT_ITEMS = 1000
_MAX_AUTO_IN_FLIGHT_ITEMS = 4096
# A writer dropped without close() waits at most this long for its items' acks before it closes
# (Reverb's C++ writer waits without a limit), and gives up sooner when no ack came for the
# second figure (a server that stopped answering; a rate limiter's hold is reported at once).
_DROPPED_WRITER_FLUSH_SECONDS = 30.0
_DROPPED_WRITER_STALL_SECONDS = 2.0


class TrajectoryWriter(_StepAppending, _BatchAppending, _ItemCreation, _ChunkSending):
    """Writes steps and items over one InsertStream (see the module docstring). Each base is one
    of its roles and works on the state that `__init__` sets up here.

    Create it with `Client.trajectory_writer(num_keep_alive_refs, ...)`.

    Args:
      client: the `Client`.
      num_keep_alive_refs: how many of the latest steps items may reference (None: the
        client's `max_num_keep_alive_refs`, for the one-argument form of Reverb's constructor).
      chunk_length: steps per chunk; None closes a chunk when an item references it.
      delta_encoded: delta-encode integer columns of rank >= 1 per step along time.
      max_in_flight_items: the most unacknowledged items before calls block. None (the
        default): sized from the first step, as many as 4 MB of such steps, 1,000 to 4,096
        items. The stream's window stays within it and within 16 MB of chunk bytes, and is
        smaller while rate limiters hold inserts back (see `replay.insert_stream`).
      call_timeout: seconds the writer's stream may last (its gRPC deadline; None: no limit).
        For one-shot writes such as `Client.insert`: when it passes, the stream fails with
        DeadlineExceededError and the server cancels inserts it has not made yet.
      validate_items: check each item against its table's signature in `create_item` (Reverb's
        option of the same name, which `Client.trajectory_writer` sets by default); the
        signatures are fetched with `server_info` once per client, within
        `get_signature_timeout_ms` (None: no limit).

    Raises:
      InvalidArgumentError: non-positive num_keep_alive_refs, chunk_length or max_in_flight_items.
    """

    def __init__(self, client, num_keep_alive_refs: Optional[int] = None, chunk_length: Optional[int] = None,
                 delta_encoded: bool = False, max_in_flight_items: Optional[int] = None,
                 call_timeout: Optional[float] = None, *, validate_items: bool = False,
                 get_signature_timeout_ms: Optional[int] = None):
        if num_keep_alive_refs is None:
            # Reverb's constructor takes only its internal writer, which knows this number.
            num_keep_alive_refs = getattr(client, "max_num_keep_alive_refs", 0)
        if num_keep_alive_refs < 1:
            raise errors.InvalidArgumentError(
                f"num_keep_alive_refs ({num_keep_alive_refs}) must be a positive integer")
        if chunk_length is not None and chunk_length <= 0:
            raise errors.InvalidArgumentError(f"chunk_length must be positive or None, got {chunk_length}")
        if max_in_flight_items is not None and max_in_flight_items <= 0:
            raise errors.InvalidArgumentError(
                f"max_in_flight_items must be positive, got {max_in_flight_items}")
        self._client = client
        self._keep = int(num_keep_alive_refs)
        self._chunk_length = chunk_length
        self._delta = bool(delta_encoded)
        self._auto_in_flight = max_in_flight_items is None
        self._weak_self = weakref.ref(self)
        self._stream = _StreamOnFirstUse(self._weak_self, client, max_in_flight_items or _MIN_AUTO_IN_FLIGHT_ITEMS,
                                         call_timeout)
        self._validate_items = bool(validate_items)
        self._signature_timeout = None if get_signature_timeout_ms is None else get_signature_timeout_ms / 1000
        self._valid_layouts: Dict[str, set] = {}  # table -> item layouts that fit its signature
        self._rng = random.Random(os.urandom(16))
        self._keys = _random_keys(self._rng)  # (not a method: the generator would hold self)
        # Columns, in the order they first appeared (Reverb's column indices), and slots: the
        # leaves of a chunk's steps, one per column that has had a value, in that order.
        self._structure = None  # the union of the steps' structures, leaves: column indices
        self._paths: List[tuple] = []  # column -> path
        self._path_index: Dict[tuple, int] = {}  # path -> column
        self._column_slot: List[Optional[int]] = []  # column -> slot, None until it has a value
        self._leaf_specs: Optional[List[Tuple[tuple, np.dtype]]] = None  # slot -> (shape, dtype)
        self._leaf_dtype_strs: List[Optional[str]] = []
        self._zeros: List[np.ndarray] = []  # slot -> the value of a step without it
        self._compress_hints: List[list] = []
        # The fast path's state: set while every column has a slot in column order and steps
        # are whole; a flat dict of plain leaves skips dm-tree (see _StepAppending._step_leaves).
        self._dense = False
        self._one_leaf = False  # the steps are one array, not a nest
        self._dict_keys: Optional[List[Any]] = None
        self._first_key_order: Optional[List[Any]] = None
        self._history: List[Deque[Optional[CellRef]]] = []  # column -> kept cells
        self._history_count = [0]  # steps in the history (shared with its _ColumnHistory views)
        self._history_nest = None  # what `history` returns, until the structure grows
        self._column_configs: Dict[tuple, Tuple[int, Optional[int]]] = {}
        # A step built by append(..., partial_step=True): the builders holding its rows (more
        # than one when a chunk closed while it was open), its row and the columns set so far.
        self._open_step_builders: Optional[List[_ChunkBuilder]] = None
        self._open_row: Optional[list] = None
        self._open_row_builder: Optional[_ChunkBuilder] = None
        self._open_offset = 0
        self._window: Deque[Any] = collections.deque()  # per kept step: its builder (or a tuple)
        self._open: Optional[_ChunkBuilder] = None
        self._pending: Deque[Tuple[str, float, int, list, list]] = collections.deque()
        # Keys of sent chunks no item will reference again; they go out with the next message
        # rather than as a message of their own.
        self._releases: List[int] = []
        self._episode_id = self._new_key()
        self._episode_step = 0
        self._serial = 0  # steps appended over all episodes
        self._closed = False

    def _new_key(self) -> int:
        return next(self._keys)

    # -- properties ------------------------------------------------------------------------

    @property
    def episode_steps(self) -> int:
        """Steps completed in the current episode (a partial step counts once complete)."""
        return self._episode_step

    @property
    def max_num_keep_alive_refs(self) -> int:
        """How many of the latest steps items may reference."""
        return self._keep

    @property
    def max_in_flight_items(self) -> int:
        return self._stream.max_in_flight_items

    @property
    def num_unacked_items(self) -> int:
        """Items sent (or queued) that the server has not acknowledged yet."""
        return self._stream.num_unacked

    def configure(self, path: tuple, *, num_keep_alive_refs: int, max_chunk_length: Optional[int]) -> None:
        """Reverb's per-column chunking options. Accepted and validated; this writer chunks all
        columns together with its own `chunk_length` and keeps `num_keep_alive_refs` steps of
        every column, so the values have no further effect.

        Raises:
          InvalidArgumentError (a ValueError): num_keep_alive_refs < 1, or max_chunk_length < 1
            or > num_keep_alive_refs.
        """
        if num_keep_alive_refs < 1:
            raise errors.InvalidArgumentError(
                f"num_keep_alive_refs ({num_keep_alive_refs}) must be a positive integer")
        if max_chunk_length is not None and not 1 <= max_chunk_length <= num_keep_alive_refs:
            raise errors.InvalidArgumentError(
                f"max_chunk_length ({max_chunk_length}) must be None or a positive integer <= "
                f"num_keep_alive_refs ({num_keep_alive_refs})")
        self._column_configs[path] = (num_keep_alive_refs, max_chunk_length)

    def _size_in_flight(self, leaves: List[np.ndarray]) -> None:
        """Without an explicit max_in_flight_items: as many items as _AUTO_IN_FLIGHT_BYTES of
        steps like the first, within bounds."""
        if self._auto_in_flight:
            step_bytes = sum(leaf.nbytes for leaf in leaves)
            self._stream.max_in_flight_items = min(
                _MAX_AUTO_IN_FLIGHT_ITEMS,
                max(_MIN_AUTO_IN_FLIGHT_ITEMS, _AUTO_IN_FLIGHT_BYTES // max(step_bytes, 1)))


    @property
    def history(self) -> Any:
        """Every step's cells since the episode began: a nest (the union of the steps'
        structures) of `_ColumnHistory`, one per column (see there for indexing).

        Raises:
          FailedPreconditionError (a RuntimeError): nothing was appended yet.
        """
        nest = self._history_nest
        if nest is None:
            if not self._paths:
                raise errors.FailedPreconditionError(
                    "history cannot be accessed before `append` is called at least once.")
            # views of the deques, which change in place: built again only when columns are added
            columns = [_ColumnHistory(path, cells, self._history_count)
                       for path, cells in zip(self._paths, self._history)]
            nest = self._history_nest = (columns[0] if self._one_leaf
                                         else tree.unflatten_as(self._structure,
                                                                [columns[c] for c in tree.flatten(self._structure)]))
        return nest


    # -- flushing and episodes -----------------------------------------------------------

    def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None) -> None:
        """Sends every created item (closing chunks they wait for) and blocks until at most
        `block_until_num_items` items are unacknowledged. On a timeout the items stay queued
        and are sent and inserted in the background.

        Args:
          block_until_num_items: how many items may stay unacknowledged.
          timeout_ms: how long to wait; None (or, as in Reverb, <= 0): no limit.

        Raises:
          InvalidArgumentError (a ValueError): block_until_num_items < 0.
          DeadlineExceededError: not within `timeout_ms`. Any error of the stream, e.g.
            UnavailableError when the server went away, NotFoundError for an unknown table,
            SignatureMismatchError for data that does not fit a table.
          CancelledError (a RuntimeError): the writer is closed.
        """
        if block_until_num_items < 0:
            raise errors.InvalidArgumentError(
                f"block_until_num_items must be >= 0, got {block_until_num_items}")
        self._check_open()
        self._close_referenced_chunks()
        timeout = None if timeout_ms is None or timeout_ms <= 0 else timeout_ms / 1000
        try:
            self._stream.wait(block_until_num_items, timeout)
        except errors.DeadlineExceededError as e:
            raise errors.DeadlineExceededError(
                f"Flush call did not complete within provided timeout of "
                f"{datetime.timedelta(milliseconds=timeout_ms)} ({e})") from None

    def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Flushes (every item acknowledged) and starts a new episode: `episode_steps` is 0 and
        a new episode id is drawn. With `clear_buffers` the history is emptied (an open partial
        step with it) and later items cannot reference earlier steps; without it the history
        goes on (its indices keep counting from the earlier episode's start, an open partial
        step stays open and counts in the new episode once complete) and items may span both
        episodes.

        Args:
          clear_buffers: whether to empty the history.
          timeout_ms: how long to wait for the acknowledgements (None: no limit; 0: only those
            already there). On a timeout the episode does not end (as in Reverb's C++ writer):
            the items stay queued and a later call can end it.

        Raises:
          DeadlineExceededError: not within `timeout_ms`. Errors of the stream, as `flush`.
          CancelledError (a RuntimeError): the writer is closed.
        """
        self._check_open()
        self._close_referenced_chunks()
        try:
            self._stream.wait(0, None if timeout_ms is None else max(0, timeout_ms) / 1000)
        except errors.DeadlineExceededError as e:
            raise errors.DeadlineExceededError(
                f"End episode call did not complete within provided timeout of "
                f"{datetime.timedelta(milliseconds=timeout_ms)} ({e})") from None
        if clear_buffers:
            if self._open_row is not None:  # the open partial step goes with the history
                for builder in self._open_step_builders:
                    builder.live_steps -= 1
                    if builder.live_steps == 0 and builder is not self._open and builder.pending_items == 0:
                        self._release(builder, self._releases)
                self._open_row = self._open_row_builder = self._open_step_builders = None
                self._update_dense()
            for kept in set(self._window):
                for builder in (kept if type(kept) is tuple else (kept,)):
                    builder.live_steps = 0
                    if builder is not self._open and builder.pending_items == 0:
                        self._release(builder, self._releases)
            if self._open is not None:
                self._open.released = True
                self._open = None
            self._window.clear()
            for history in self._history:
                history.clear()
            self._history_count[0] = 0
        elif self._open is not None:
            self._finalize(self._open)  # the next episode's steps go into chunks of their own
        self._send_releases()
        self._episode_id = self._new_key()
        self._episode_step = 0

    def close(self, flush: bool = False, cancel: bool = False) -> None:
        """Ends the writer. Idempotent. Items already created are sent and the stream ends
        once the server acknowledged them (waiting at most a few seconds, then cancelling);
        errors of the stream are not raised. Reverb's close cancels the stream instead.

        Extensions: with `flush`, first waits (without a limit) for every item's
        acknowledgement and raises the stream's errors, as `flush`; with `cancel` (and no
        flush) the stream is cancelled at once: items not acknowledged yet may or may not have
        been inserted, and none is inserted later.
        """
        if self._closed:
            return
        if type(self._stream) is _StreamOnFirstUse and not self._pending:
            self._closed = True  # nothing was ever sent: there is no stream to end
            return
        try:
            if not cancel or flush:
                self._close_referenced_chunks()
            if flush:
                self._stream.wait(0, None)
        finally:
            self._closed = True
            self._stream.close(cancel=cancel and not flush)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.CancelledError("TrajectoryWriter::Close has been called.")

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, exc_type, exc, tb):
        # As Reverb's: flushes unless the block raised a replay error; then (an extension)
        # closes the stream.
        try:
            if exc_type is None or not issubclass(exc_type, errors.ReplayError):
                self.flush()
        finally:
            try:
                self.close()
            except errors.ReplayError:
                if exc_type is None:
                    raise

    def __del__(self):
        # As Reverb's C++ writer does when it is destroyed: what was created is sent and
        # acknowledged first, so items created before the writer went out of scope are in their
        # tables once it is gone. But only while acks keep coming (see `InsertStream.drain`):
        # this may run in the garbage collector's pass of any thread, and a writer held back by
        # a rate limiter would hold that thread until the limiter reopens. Such a stream is
        # cancelled (what Reverb's Python writer does to every dropped writer).
        if not getattr(self, "_closed", True):
            self._close_dropped()

    def _close_dropped(self) -> None:
        """Closes a writer that was dropped without `close` (see `__del__`); raises nothing."""
        if self._closed:
            return
        if type(self._stream) is _StreamOnFirstUse and not self._pending:
            self._closed = True
            return
        drained = False
        try:
            self._close_referenced_chunks()
            drained = self._stream.drain(_DROPPED_WRITER_FLUSH_SECONDS, _DROPPED_WRITER_STALL_SECONDS)
        except BaseException:  # noqa: BLE001 - nowhere to report it from a finalizer
            pass
        try:
            self._closed = True
            self._stream.close(cancel=not drained)
        except BaseException:  # noqa: BLE001
            pass




# -- helpers -------------------------------------------------------------------------------------


def _random_keys(rng: random.Random):
    """Random keys in [1, 2**63], made a thousand at a time (a writer takes two per item)."""
    getrandbits = rng.getrandbits
    while True:
        yield from [getrandbits(63) + 1 for _ in range(1024)]
