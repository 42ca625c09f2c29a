"""Tables: the items of one replay stream, with the rules for sampling, eviction and rate.

A `Table` holds `replay.items.Item`s by key. Its sampler selector picks what `sample` returns, its
remover selector picks what is evicted when the table is over `max_size`, its rate limiter decides
when inserts and samples may proceed (blocking callers on condition variables, or, for callers that
must not block such as the replay server's event loop, refusing at once and signalling when to try
again: `try_insert_many`, `try_sample`, `add_change_listener`), and its extensions
observe every change inside the same atomic step. The replay server owns one `Table` per name and
calls it from many threads; everything here is thread-safe and needs no TensorFlow.

The table owns the `Item` objects given to it: it updates their `priority` and `times_sampled`.
Do not insert one `Item` object into two tables; build one per table (they can share chunks).
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
import weakref
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import tree

from replay import errors, specs
from replay.extensions import TableExtension, extension_from_config
from replay.items import Item
from replay.rate_limiters import Queue, RateLimiter, Stack, rate_limiter_from_config
from replay.selectors import Fifo, ItemSelector, Lifo, exhaust, selector_from_options
from replay.table_info import TableInfo


@dataclasses.dataclass
class SampledItem:
    """One sampled item and its state at the moment of sampling (times_sampled includes this sample)."""

    item: Item
    probability: float
    table_size: int
    priority: float
    times_sampled: int


_COUNTERS = ("num_inserts", "num_samples", "num_deletes", "num_evictions", "num_updates", "num_unique_samples",
             "num_deleted_episodes")

_SPEC_KEYS = {"shape", "dtype", "name"}
# The most items one `sample` call takes while holding the table's lock: a caller asking for more
# gets this many and calls again, so no request can hold the table for long.
MAX_SAMPLES_PER_CALL = 4096
# Distinct item column layouts a table remembers as checked against its signature.
_MAX_FITTING_LAYOUTS = 64
# chunks whose step items were found to fit the signature (weakly held: they go with their chunk)
_MAX_FITTING_SPANS = 4096


def _signature_to_config(signature):
    if signature is None:
        return None
    return tree.map_structure(lambda spec: spec.to_dict(), signature)


def _signature_from_config(config):
    """Inverse of `_signature_to_config`: a nest whose leaves are dicts with 'shape' and 'dtype'
    (and optionally 'name'); lists and tuples become lists, dicts stay dicts."""
    if config is None:
        return None
    if isinstance(config, dict):
        if "shape" in config and "dtype" in config and set(config) <= _SPEC_KEYS:
            return specs.TensorSpec.from_dict(config)
        return {k: _signature_from_config(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [_signature_from_config(v) for v in config]
    raise errors.InvalidArgumentError(
        f"signature: expected a nest of {{'shape': [...], 'dtype': ...}} specs, found {config!r}")


def _episode_ids(item: Item) -> list:
    """The episode id of each chunk the item references (one per chunk, as Reverb counts)."""
    chunk = item.span_chunk
    if chunk is not None:
        return [chunk.episode_id]
    return [chunk.episode_id for chunk in item.chunks.values()]


def _check_size(name: str, value, minimum: int, table: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise errors.InvalidArgumentError(
            f"table {table!r}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class Table:
    """A thread-safe replay table (Reverb's `Table`).

    Args:
      name: table name.
      sampler: `ItemSelector` choosing sampled items.
      remover: `ItemSelector` choosing evicted items.
      max_size: most items held; inserting beyond it evicts through the remover.
      rate_limiter: a `RateLimiter` used by this table only.
      max_times_sampled: an item is deleted when sampled this many times (0 = never).
      extensions: `TableExtension`s, one instance per table.
      signature: nest of specs (anything with .shape and .dtype) the items' columns must match, or None.
        A column matches its spec as a whole or step by step (the spec's shape after the
        column's leading time dimension: Reverb's legacy `Writer` and `Client.insert` items);
        the items a table holds match it the same way, column by column (the first item that
        matches only one way decides, until the table is empty again or reset), so one signed
        table never holds a column in two shapes.

    Raises (constructor):
      InvalidArgumentError: empty name, max_size < 1, max_times_sampled < 0, a selector or rate
        limiter of the wrong type or already used by another table, or an extension of another table.
    """

    def __init__(self, name: str, sampler: ItemSelector, remover: ItemSelector, max_size: int,
                 rate_limiter: RateLimiter, max_times_sampled: int = 0,
                 extensions: Sequence[TableExtension] = (), signature: Any = None):
        if not isinstance(name, str) or not name:
            raise errors.InvalidArgumentError(f"a table name must be a non-empty string, got {name!r}")
        self.name = name
        self.max_size = _check_size("max_size", max_size, 1, name)
        self.max_times_sampled = _check_size("max_times_sampled", max_times_sampled, 0, name)
        for role, selector in (("sampler", sampler), ("remover", remover)):
            if not isinstance(selector, ItemSelector):
                raise errors.InvalidArgumentError(
                    f"table {name!r}: {role} must be a replay.selectors selector, got {selector!r}")
        if sampler is remover:
            raise errors.InvalidArgumentError(
                f"table {name!r}: sampler and remover must be two selector objects; create one for each")
        if not isinstance(rate_limiter, RateLimiter):
            raise errors.InvalidArgumentError(
                f"table {name!r}: rate_limiter must be a replay.rate_limiters rate limiter, got {rate_limiter!r}")
        if rate_limiter.owner is not None:
            raise errors.InvalidArgumentError(
                f"table {name!r}: the rate limiter already belongs to table {rate_limiter.owner!r}; "
                "create one rate limiter per table")
        if len(sampler) or len(remover):
            raise errors.InvalidArgumentError(f"table {name!r}: the selectors must be empty")
        extensions = tuple(extensions)
        for extension in extensions:
            if not isinstance(extension, TableExtension):
                raise errors.InvalidArgumentError(
                    f"table {name!r}: extensions must be replay.extensions.TableExtension, got {extension!r}")
            if extension.table is not None:
                raise errors.InvalidArgumentError(
                    f"table {name!r}: extension {type(extension).__name__} already belongs to table "
                    f"{extension.table.name!r}; create one extension per table")
        try:
            self.signature = specs.as_signature(signature)
        except (TypeError, ValueError, AttributeError) as e:
            raise errors.InvalidArgumentError(
                f"table {name!r}: the signature must be a nest of specs with .shape and .dtype: {e}") from e
        # Per signature column, how the present items' columns fit it (`specs.FITS_WHOLE`,
        # `FITS_STEP` or both while no item decided): all one way, so that a signed table never
        # holds one column in two shapes (a step-sized column `x[-1:]` beside whole ones).
        self._column_modes: Optional[Tuple[int, ...]] = None
        # Column layouts (shape, dtype per column) already checked against the signature and
        # the column modes: a table's items almost always share one, and checking walks the
        # signature nest. Replaced (not changed) whenever the modes are reset.
        self._fitting_layouts: set = set()
        self._fitting_spans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        rate_limiter.owner = name
        self._sampler = sampler
        self._remover = remover
        # Selectors that accept every priority `Item.validate` accepts (no check of their own)
        # let `validate_items` skip their per-item checks.
        self._selectors_check_priorities = any(
            type(s).validate_priority is not ItemSelector.validate_priority for s in (sampler, remover))
        self._rate_limiter = rate_limiter
        self._extensions = extensions
        self._items = {}  # key -> Item, in insertion order
        self._lock = threading.Lock()
        self._insert_cv = threading.Condition(self._lock)
        self._sample_cv = threading.Condition(self._lock)
        self._insert_waiters = 0
        self._sample_waiters = 0
        self._closed = False
        self._num_inserts = self._num_samples = self._num_deletes = self._num_evictions = 0
        self._num_updates = 0
        self._num_unique_samples = self._num_deleted_episodes = 0
        # episode id -> chunks of present items from that episode (one per item and chunk)
        self._episode_refs: dict = {}
        self._listeners: List[Callable[[str], None]] = []
        for extension in extensions:
            extension.on_register(self)

    @classmethod
    def queue(cls, name: str, max_size: int, extensions: Sequence[TableExtension] = (),
              signature: Any = None) -> "Table":
        """A FIFO queue: each item is sampled once, inserts block when `max_size` items wait.

        Raises:
          InvalidArgumentError: max_size < 1 or a bad name.
        """
        return cls(name, Fifo(), Fifo(), max_size, Queue(_check_size("max_size", max_size, 1, name)),
                   max_times_sampled=1, extensions=extensions, signature=signature)

    @classmethod
    def stack(cls, name: str, max_size: int, extensions: Sequence[TableExtension] = (),
              signature: Any = None) -> "Table":
        """A LIFO stack: each item is sampled once, inserts block when `max_size` items wait.

        Raises:
          InvalidArgumentError: max_size < 1 or a bad name.
        """
        return cls(name, Lifo(), Lifo(), max_size, Stack(_check_size("max_size", max_size, 1, name)),
                   max_times_sampled=1, extensions=extensions, signature=signature)

    # -- properties -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size(self) -> int:
        return len(self._items)

    @property
    def rate_limiter(self) -> RateLimiter:
        return self._rate_limiter

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"Table(name={self.name!r}, size={len(self._items)}, max_size={self.max_size}, "
                f"sampler={self._sampler!r}, "
                f"remover={self._remover!r}, rate_limiter={self._rate_limiter!r})")

    # -- validation (no lock needed but to settle the column modes: reads the item and the
    # -- immutable configuration) ---------------------------------------------------------------

    def _validate_item(self, item: Item) -> float:
        if not isinstance(item, Item):
            raise errors.InvalidArgumentError(f"table {self.name!r}: expected a replay.items.Item, got {item!r}")
        item.validate()
        if self.signature is not None:
            span = item.span
            fitting_spans = self._fitting_spans
            if span is not None:
                # the items of one chunk with the same length and squeeze flags share a layout
                chunk = item.span_chunk
                fitting = fitting_spans.get(chunk)
                if fitting is not None and (span[2], span[3]) in fitting:
                    return self._validate_priority(item.key, item.priority)
            layout = tuple(item.column_specs())
            fitting_layouts = self._fitting_layouts
            if layout not in fitting_layouts:
                fits = specs.column_fits(self.signature, list(layout), self.name)
                fitting_layouts, fitting_spans = self._settle_column_modes(layout, fits)
                if len(fitting_layouts) < _MAX_FITTING_LAYOUTS:
                    fitting_layouts.add(layout)
            if span is not None:
                if chunk not in fitting_spans and len(fitting_spans) >= _MAX_FITTING_SPANS:
                    fitting_spans.clear()  # items of a chunk mostly arrive together
                fitting_spans.setdefault(chunk, set()).add((span[2], span[3]))
        return self._validate_priority(item.key, item.priority)

    def _settle_column_modes(self, layout: tuple, fits: Tuple[int, ...]):
        """Narrows the column modes to an item's `fits` (an empty table starts afresh); returns
        the layout caches that hold for the modes now.

        Raises:
          SignatureMismatchError: a column fits the signature only the other way than the
            present items' do.
        """
        with self._lock:
            if not self._items and self._column_modes is not None:
                self._column_modes = None
                self._fitting_layouts, self._fitting_spans = set(), weakref.WeakKeyDictionary()
            modes = self._column_modes or (specs.FITS_WHOLE | specs.FITS_STEP,) * len(fits)
            settled = tuple(mode & fit for mode, fit in zip(modes, fits))
            for index, mode in enumerate(settled):
                if not mode:
                    path = tree.flatten_with_path(self.signature)[index][0]
                    spec = tree.flatten(self.signature)[index]
                    shape = layout[index][0]
                    held = "whole columns" if modes[index] == specs.FITS_WHOLE else "one step per time step"
                    raise errors.SignatureMismatchError(
                        f"table {self.name!r}: column {path or '(root)'} has shape {shape}, which fits the "
                        f"signature's shape {spec.shape} only "
                        f"{'as one step' if fits[index] == specs.FITS_STEP else 'as the whole column'}, "
                        f"but the table's items hold that column with the signature describing "
                        f"{held}; a signed table holds each column in one shape family (build the "
                        f"item as the signature describes it, e.g. history[...][-1] rather than [-1:] "
                        f"for a shape [] column)")
            if settled != self._column_modes:
                self._column_modes = settled
            return self._fitting_layouts, self._fitting_spans

    def _validate_priority(self, key: int, priority) -> float:
        value = self._sampler.validate_priority(key, priority)
        self._remover.validate_priority(key, value)
        return value

    # -- waiting ------------------------------------------------------------------------------

    def _check_open(self):
        if self._closed:
            raise errors.CancelledError(f"table {self.name!r} is closed")

    @staticmethod
    def _deadline(timeout: Optional[float]) -> Optional[float]:
        if timeout is None:
            return None
        timeout = float(timeout)
        if math.isnan(timeout) or timeout < 0:
            raise errors.InvalidArgumentError(f"timeout must be None or a number >= 0 seconds, got {timeout}")
        return time.monotonic() + timeout

    def _wait_to_insert(self, deadline: Optional[float], timeout: Optional[float]) -> None:
        """Waits (lock held) until one insert may proceed."""
        self._wait_for_limiter("insert", self._rate_limiter.can_insert,
                               self._rate_limiter.insert_blocker, self._insert_cv, deadline, timeout)

    def _wait_to_sample(self, deadline: Optional[float], timeout: Optional[float]) -> None:
        """Waits (lock held) until one sample may proceed."""
        self._wait_for_limiter("sample", self._rate_limiter.can_sample,
                               self._rate_limiter.sample_blocker, self._sample_cv, deadline, timeout)

    def _wait_for_limiter(self, operation: str, allowed, blocker, condition, deadline, timeout) -> None:
        """Waits on `condition` until `allowed(size, 1)`; counts itself in `_<operation>_waiters`
        so the other side only notifies when someone waits."""
        waiters = f"_{operation}_waiters"
        while not allowed(len(self._items), 1):
            self._check_open()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise errors.DeadlineExceededError(
                    f"table {self.name!r}: {operation} timed out after {timeout:g} s: "
                    f"{blocker(len(self._items), 1)}")
            setattr(self, waiters, getattr(self, waiters) + 1)
            try:
                condition.wait(remaining)
            finally:
                setattr(self, waiters, getattr(self, waiters) - 1)
        self._check_open()

    def _wake_inserters(self):
        if self._insert_waiters:
            self._insert_cv.notify_all()
        for listener in self._listeners:
            listener("insert")

    def _wake_samplers(self):
        if self._sample_waiters:
            self._sample_cv.notify_all()
        for listener in self._listeners:
            listener("sample")

    def add_change_listener(self, listener: Callable[[str], None]) -> None:
        """Calls `listener("insert")` whenever a waiting insert may now proceed and
        `listener("sample")` whenever a waiting sample may (and both when the table closes).

        This is how waits that are not threads (the replay server's asynchronous calls, which use
        `try_insert_many` and `try_sample`) learn when to try again. The listener runs with the
        table's lock held, on whichever thread changed the table: it must return at once and
        must not call the table.
        """
        with self._lock:
            self._listeners = self._listeners + [listener]

    def remove_change_listener(self, listener: Callable[[str], None]) -> None:
        """Stops calling a listener given to `add_change_listener` (unknown ones are ignored)."""
        with self._lock:
            self._listeners = [x for x in self._listeners if x is not listener]

    # -- internal mutations (lock held) ---------------------------------------------------------

    def _add_locked(self, item: Item) -> None:
        key = item.key
        self._items[key] = item
        self._sampler.insert(key, item.priority)
        self._remover.insert(key, item.priority)
        self._rate_limiter.insert_count += 1
        self._num_inserts += 1
        self._reference_episodes_locked(item)
        for extension in self._extensions:
            extension.on_insert(item)
        while len(self._items) > self.max_size:
            victim, _ = self._remover.sample()
            self._remove_locked(victim)
            self._num_evictions += 1

    def _add_new_fifo_locked(self, items: Sequence[Item]) -> Optional[int]:
        """`_add_locked` for every item of a batch the rate limiter admits whole, when the table
        has no extensions, its remover is a Fifo and the keys are new (none present, none
        twice), with bulk selector calls: the items that fit are inserted, and each further one evicts the
        oldest item, which (while old items are left) is the next of the `oldest` before the
        batch, so the changes are those of inserting one at a time. None (nothing done) for
        other batches."""
        present, remover = self._items, self._remover
        n = len(items)
        room = self.max_size - len(present)
        evictions = n - room if n > room else 0
        new = {item.key: item for item in items}
        if room < 0 or len(new) != n or evictions > len(present) or not present.keys().isdisjoint(new):
            return None
        pairs = [(item.key, item.priority) for item in items]
        victims = remover.oldest(evictions)
        sampler = self._sampler
        if evictions < n:
            head = pairs[:n - evictions]
            sampler.insert_many(head)
            remover.insert_many(head)
        reference, release = self._reference_episodes_locked, self._release_episodes_locked
        exhaust(map(reference, items[:n - evictions]))  # (a C loop)
        if evictions:
            tail = pairs[n - evictions:]
            sampler.replace_many(victims, tail)
            remover.replace_many(victims, tail)
            # Each further item's episodes are referenced before its victim's are released, as
            # one insert at a time does (it decides when an episode counts as deleted).
            for item, victim in zip(items[n - evictions:], map(present.pop, victims)):
                reference(item)
                release(victim)
        present.update(new)
        limiter = self._rate_limiter
        limiter.insert_count += n
        limiter.delete_count += evictions
        self._num_inserts += n
        self._num_evictions += evictions
        return n

    def _reference_episodes_locked(self, item: Item) -> None:
        refs = self._episode_refs
        for episode in _episode_ids(item):
            refs[episode] = refs.get(episode, 0) + 1

    def _release_episodes_locked(self, item: Item) -> None:
        refs = self._episode_refs
        for episode in _episode_ids(item):
            left = refs.get(episode, 0) - 1
            if left > 0:
                refs[episode] = left
            else:
                refs.pop(episode, None)
                self._num_deleted_episodes += 1

    def _remove_locked(self, key: int) -> Item:
        item = self._items.pop(key)
        self._release_episodes_locked(item)
        self._sampler.delete(key)
        self._remover.delete(key)
        self._rate_limiter.delete_count += 1
        for extension in self._extensions:
            extension.on_delete(item)
        return item

    def _update_locked(self, item: Item, priority: float) -> None:
        old = item.priority
        item.priority = priority
        self._sampler.update(item.key, priority)
        self._remover.update(item.key, priority)
        self._num_updates += 1
        for extension in self._extensions:
            extension.on_update(item, old)

    def _finish_updates_locked(self) -> None:
        for extension in self._extensions:
            extension.after_priority_updates()

    def _insert_one_locked(self, item: Item, deadline, timeout) -> None:
        existing = self._items.get(item.key)
        if existing is None:
            self._wait_to_insert(deadline, timeout)
            existing = self._items.get(item.key)  # another thread may have inserted it meanwhile
        if existing is not None:
            self._update_locked(existing, item.priority)
            self._finish_updates_locked()
            return
        self._add_locked(item)

    # -- hooks' access -----------------------------------------------------------------------------

    def get_priority_in_hook(self, key: int) -> float:
        """The priority of a present item. Only for extension hooks (the lock is held)."""
        return self._items[key].priority

    def assign_priority_in_hook(self, key: int, priority: float) -> None:
        """Sets a present item's priority without calling any extension hook. Only for extension
        hooks (the lock is held); the priority must be valid."""
        item = self._items[key]
        item.priority = priority
        self._sampler.update(key, priority)
        self._remover.update(key, priority)

    # -- public operations ------------------------------------------------------------------------

    def insert_or_assign(self, item: Item, timeout: Optional[float] = None) -> None:
        """Inserts an item, or, when its key is present, updates only that item's priority.

        The item is validated before anything waits or changes. A new item waits for the rate limiter;
        then, if the table is over max_size, the remover evicts items.

        Raises:
          InvalidArgumentError: bad priority, malformed trajectory, or bad timeout.
          SignatureMismatchError: the columns do not match the table's signature, or match it
            another way than the present items' columns (see the class docstring).
          NotFoundError: a slice names a chunk the item does not hold.
          DeadlineExceededError: the rate limiter blocked the insert past `timeout` seconds; the message
            says which condition blocks, with the numbers.
          CancelledError: the table is or was closed while waiting.
        """
        item.priority = self._validate_item(item)
        deadline = self._deadline(timeout)
        with self._lock:
            self._check_open()
            self._insert_one_locked(item, deadline, timeout)
            self._wake_samplers()

    def insert_many(self, items: Sequence[Item], timeout: Optional[float] = None) -> None:
        """Inserts items in order with the semantics of `insert_or_assign`, taking the lock once for
        the whole batch (it is released only while waiting for the rate limiter). Every item is
        validated before any is inserted. `timeout` bounds the whole call; when it expires, the items
        before the blocked one stay inserted and the error says how many.

        Raises:
          The errors of `insert_or_assign`.
        """
        items = self.validate_items(items)
        deadline = self._deadline(timeout)
        with self._lock:
            self._check_open()
            for done, item in enumerate(items):
                try:
                    self._insert_one_locked(item, deadline, timeout)
                except errors.DeadlineExceededError as e:
                    raise errors.DeadlineExceededError(
                        f"{e} ({done} of {len(items)} items of this insert_many were inserted)") from None
                finally:
                    self._wake_samplers()

    def validate_items(self, items: Sequence[Item]) -> List[Item]:
        """Checks items for `try_insert_many` (as `insert_many` does before inserting anything) and
        stores their normalized priorities; returns them as a list.

        Raises:
          The validation errors of `insert_or_assign` (InvalidArgumentError,
          SignatureMismatchError, NotFoundError).
        """
        items = list(items)
        if self.signature is None and not self._selectors_check_priorities and all(
                type(item) is Item and type(item.priority) is float for item in items):
            # what a writer sends to a table without a signature: `Item.validate` checks all
            for item in items:
                item.validate()
            return items
        priorities = [self._validate_item(item) for item in items]
        for item, priority in zip(items, priorities):
            item.priority = priority
        return items

    def try_insert_many(self, items: Sequence[Item]) -> int:
        """Inserts items that passed `validate_items`, in order, while the rate limiter allows it,
        without waiting; returns how many were inserted (or updated, for present keys). The caller
        waits (see `add_change_listener`) and calls again with the rest.

        Raises:
          CancelledError: the table is closed.
        """
        done = 0
        with self._lock:
            self._check_open()
            limiter, present = self._rate_limiter, self._items
            try:
                # A limiter that admits the whole batch admits each of its inserts (its cursor
                # only moves up with inserts), so they need no check one by one.
                admitted = limiter.can_insert(len(present), len(items))
                if admitted and not self._extensions and type(self._remover) is Fifo:
                    bulk = self._add_new_fifo_locked(items)
                    if bulk is not None:
                        done = bulk
                        return done
                for item in items:
                    existing = present.get(item.key)
                    if existing is not None:
                        self._update_locked(existing, item.priority)
                        self._finish_updates_locked()
                    elif admitted or limiter.can_insert(len(present), 1):
                        self._add_locked(item)
                    else:
                        break
                    done += 1
            finally:
                if done:
                    self._wake_samplers()
        return done

    def insert_blocker(self) -> str:
        """Why an insert waits now, with the rate limiter's numbers (for timeout messages)."""
        with self._lock:
            return self._rate_limiter.insert_blocker(len(self._items), 1)

    def can_sample(self, num_samples: int = 1) -> bool:
        """Whether the rate limiter would let `num_samples` samples proceed now (Reverb's name)."""
        with self._lock:
            return self._rate_limiter.can_sample(len(self._items), num_samples)

    def can_insert(self, num_inserts: int = 1) -> bool:
        """Whether the rate limiter would let `num_inserts` inserts proceed now (Reverb's name)."""
        with self._lock:
            return self._rate_limiter.can_insert(len(self._items), num_inserts)

    def sample_blocker(self) -> str:
        """Why a sample waits now, with the rate limiter's numbers (for timeout messages)."""
        with self._lock:
            return self._rate_limiter.sample_blocker(len(self._items), 1)

    def try_sample(self, num_samples: int) -> List[SampledItem]:
        """Like `sample` without waiting: the samples the rate limiter allows now (at most
        `num_samples` and `MAX_SAMPLES_PER_CALL`), possibly none.

        Raises:
          InvalidArgumentError: num_samples < 1; CancelledError: the table is closed.
        """
        num_samples = _check_size("num_samples", num_samples, 1, self.name)
        with self._lock:
            self._check_open()
            if not self._rate_limiter.can_sample(len(self._items), 1):
                return []
            return self._sample_locked(num_samples)

    def sample(self, num_samples: int = 1, timeout: Optional[float] = None) -> List[SampledItem]:
        """Samples between 1 and `num_samples` items (at most `MAX_SAMPLES_PER_CALL` per call).

        Blocks (up to `timeout` seconds; None waits forever) until the rate limiter allows one sample,
        then keeps sampling while it allows more without waiting. The same item can appear several
        times. Items that reach max_times_sampled are deleted.

        Raises:
          InvalidArgumentError: num_samples < 1 or a bad timeout.
          DeadlineExceededError: no sample was allowed within `timeout`; the message says why.
          CancelledError: the table is or was closed while waiting.
        """
        num_samples = _check_size("num_samples", num_samples, 1, self.name)
        deadline = self._deadline(timeout)
        with self._lock:
            self._check_open()
            self._wait_to_sample(deadline, timeout)
            return self._sample_locked(num_samples)

    def _sample_locked(self, num_samples: int) -> List[SampledItem]:
        """Samples at least one item (the rate limiter allows one) and at most
        min(num_samples, MAX_SAMPLES_PER_CALL), while the rate limiter allows more."""
        num_samples = min(num_samples, MAX_SAMPLES_PER_CALL)
        result = []
        limiter, items, sampler = self._rate_limiter, self._items, self._sampler
        extensions, max_times = self._extensions, self.max_times_sampled
        try:
            while True:
                key, probability = sampler.sample()
                item = items[key]
                if not item.times_sampled:
                    self._num_unique_samples += 1
                item.times_sampled += 1
                limiter.sample_count += 1
                self._num_samples += 1
                result.append(SampledItem(item, probability, len(items), item.priority, item.times_sampled))
                for extension in extensions:
                    extension.on_sample(item)
                if max_times and item.times_sampled >= max_times:
                    self._remove_locked(key)
                    self._num_deletes += 1
                if len(result) >= num_samples or not limiter.can_sample(len(items), 1):
                    break
        finally:
            if result:
                self._wake_inserters()
        return result

    def mutate_priorities(self, updates: Union[Mapping[int, float], Sequence[Tuple[int, float]]] = (),
                          deletes: Sequence[int] = ()) -> None:
        """Deletes items, then updates priorities, in one atomic step. Unknown keys are ignored.

        Raises:
          InvalidArgumentError: a priority is negative, NaN, infinite or not a number, or a key is not
            an integer; nothing changes.
          CancelledError: the table is closed.
        """
        pairs = list(updates.items()) if isinstance(updates, Mapping) else list(updates)
        checked = []
        for pair in pairs:
            try:
                key, priority = pair
                key = int(key)
            except (TypeError, ValueError) as e:
                raise errors.InvalidArgumentError(
                    f"table {self.name!r}: priority updates must be (key, priority) pairs, got {pair!r}") from e
            checked.append((key, self._validate_priority(key, priority)))
        try:
            delete_keys = [int(k) for k in deletes]
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(f"table {self.name!r}: deletes must be integer keys: {e}") from e
        with self._lock:
            self._check_open()
            for key in delete_keys:
                if key in self._items:
                    self._remove_locked(key)
                    self._num_deletes += 1
            items = self._items
            for key, priority in checked:
                item = items.get(key)
                if item is not None:
                    self._update_locked(item, priority)
            if checked:
                self._finish_updates_locked()
            if delete_keys:
                self._wake_inserters()

    def reset(self) -> None:
        """Removes every item, clears the selectors, resets the rate limiter's and the table's counters,
        and wakes blocked inserters (blocked samplers keep waiting for new items).

        Raises:
          CancelledError: the table is closed.
        """
        with self._lock:
            self._check_open()
            self._items = {}
            self._sampler.clear()
            self._remover.clear()
            self._rate_limiter.reset()
            self._num_inserts = self._num_samples = self._num_deletes = self._num_evictions = 0
            self._num_updates = self._num_unique_samples = self._num_deleted_episodes = 0
            self._episode_refs = {}
            self._column_modes = None
            self._fitting_layouts, self._fitting_spans = set(), weakref.WeakKeyDictionary()
            for extension in self._extensions:
                extension.on_reset()
            self._wake_inserters()
            self._wake_samplers()

    def close(self) -> None:
        """Wakes every blocked insert and sample with CancelledError; later operations that change or
        sample the table raise CancelledError too. `info`, `get`, `config` and `checkpoint` still work."""
        with self._lock:
            self._closed = True
            self._insert_cv.notify_all()
            self._sample_cv.notify_all()
            for listener in self._listeners:
                listener("insert")
                listener("sample")

    def get(self, key: int) -> Item:
        """The item with this key.

        Raises:
          NotFoundError: no such item.
        """
        with self._lock:
            item = self._items.get(key)
        if item is None:
            raise errors.NotFoundError(f"table {self.name!r} has no item with key {key}")
        return item

    def keys(self) -> List[int]:
        """Keys of the present items, in insertion order (a snapshot)."""
        with self._lock:
            return list(self._items)

    @property
    def info(self) -> TableInfo:
        """The table's configuration and counters now (a property, as Reverb's; `table.info()`
        also works)."""
        with self._lock:
            return TableInfo(
                name=self.name,
                current_size=len(self._items),
                max_size=self.max_size,
                max_times_sampled=self.max_times_sampled,
                sampler_options=self._sampler.options(),
                remover_options=self._remover.options(),
                rate_limiter_info=self._rate_limiter.info(),
                signature=self.signature,
                num_inserts=self._num_inserts,
                num_samples=self._num_samples,
                num_deletes=self._num_deletes,
                num_evictions=self._num_evictions,
                extensions=[extension.info() for extension in self._extensions],
                num_updates=self._num_updates,
                num_unique_samples=self._num_unique_samples,
                num_episodes=len(self._episode_refs),
                num_deleted_episodes=self._num_deleted_episodes,
            )

    # -- configuration and checkpoints ----------------------------------------------------------------

    def config(self) -> dict:
        """The table's full configuration as JSON-able data (no items, no counters)."""
        return {
            "name": self.name,
            "sampler": self._sampler.options(),
            "remover": self._remover.options(),
            "max_size": self.max_size,
            "max_times_sampled": self.max_times_sampled,
            "rate_limiter": self._rate_limiter.config(),
            "extensions": [extension.config() for extension in self._extensions],
            "signature": _signature_to_config(self.signature),
        }

    @classmethod
    def from_config(cls, config: dict) -> "Table":
        """Builds an empty table from `config()` output (also the replay server's YAML table entries).

        Required fields: name, sampler, remover, max_size, rate_limiter. Optional: max_times_sampled,
        extensions, signature.

        Raises:
          InvalidArgumentError: a missing, unknown or bad field; the message names it.
        """
        if not isinstance(config, dict):
            raise errors.InvalidArgumentError(f"a table config must be a dict, got {config!r}")
        known = {"name", "sampler", "remover", "max_size", "max_times_sampled", "rate_limiter", "extensions",
                 "signature"}
        label = f"table {config.get('name')!r}"
        unknown = set(config) - known
        if unknown:
            raise errors.InvalidArgumentError(
                f"{label}: unknown config field(s) {sorted(unknown)}; known: {sorted(known)}")
        for field in ("name", "sampler", "remover", "max_size", "rate_limiter"):
            if field not in config:
                raise errors.InvalidArgumentError(f"{label}: config field {field!r} is missing")

        def build(field, fn, value):
            try:
                return fn(value)
            except errors.InvalidArgumentError as e:
                raise errors.InvalidArgumentError(f"{label}: config field {field!r}: {e}") from e
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                raise errors.InvalidArgumentError(f"{label}: config field {field!r} is invalid ({value!r}): {e}") from e

        extensions_config = config.get("extensions") or []
        if not isinstance(extensions_config, (list, tuple)):
            raise errors.InvalidArgumentError(f"{label}: config field 'extensions' must be a list")
        return cls(
            name=config["name"],
            sampler=build("sampler", selector_from_options, config["sampler"]),
            remover=build("remover", selector_from_options, config["remover"]),
            max_size=config["max_size"],
            rate_limiter=build("rate_limiter", rate_limiter_from_config, config["rate_limiter"]),
            max_times_sampled=config.get("max_times_sampled", 0),
            extensions=[build("extensions", extension_from_config, e) for e in extensions_config],
            signature=build("signature", _signature_from_config, config.get("signature")),
        )

    def checkpoint(self) -> Tuple[dict, List[Item], dict]:
        """One consistent snapshot: (config, items, counters).

        Items come in insertion order, as copies (sharing trajectories and chunks) so later priority
        and times_sampled changes do not leak into the snapshot. Counters hold the table counters,
        the rate limiter's counts and the extensions' states.
        """
        with self._lock:
            items = [Item(i.key, i.priority, i.trajectory, i.chunks, i.times_sampled, i.inserted_at)
                     for i in self._items.values()]
            limiter = self._rate_limiter
            counters = {
                "num_inserts": self._num_inserts,
                "num_samples": self._num_samples,
                "num_deletes": self._num_deletes,
                "num_evictions": self._num_evictions,
                "num_updates": self._num_updates,
                "num_unique_samples": self._num_unique_samples,
                "num_deleted_episodes": self._num_deleted_episodes,
                "rate_limiter": {"insert_count": limiter.insert_count, "sample_count": limiter.sample_count,
                                 "delete_count": limiter.delete_count},
                "extensions": [extension.state() for extension in self._extensions],
            }
            return self.config(), items, counters

    @classmethod
    def from_checkpoint(cls, config: dict, items: Sequence[Item], counters: dict) -> "Table":
        """Rebuilds a table from `checkpoint()` output.

        Items are re-inserted in the given order without consulting the rate limiter, keeping their
        priorities, times_sampled and inserted_at; extensions see them as inserts and then get their
        saved state back; table counters are restored as saved. If there are more items than max_size,
        the remover evicts the excess (counted as evictions).

        Rate-limiter restore rule: the saved cursor is not restored, because a cursor saved while
        samplers were blocked (or whose writers never come back) would keep samplers blocked
        forever. Instead the rate limiter is rebased as if the restored n items had just been
        inserted into an empty table: insert_count = n, delete_count = 0, and sample_count chosen so
        that the cursor inserts * samples_per_insert - samples equals c, where
            c = n * samples_per_insert, raised to min_diff + 1 if n >= min_size_to_sample,
                then capped at max_diff
        (sample_count is a whole number, so the cursor may exceed c by less than 1). Consequences:
        - with n < min_size_to_sample, the table behaves like a fresh table after n inserts;
        - with n >= min_size_to_sample, floor(c - min_diff) samples proceed without any new insert
          (at least 1 whenever max_diff >= min_diff + 1); for SampleToInsertRatio(spi, m, b) that
          is floor(min(n * spi, spi * m + b) - (spi * m - b)), between b and 2b;
        - a Queue or Stack restored with n items can be drained (n samples).
        After that, sampling waits for inserts as usual. The table counters in `info()` are restored
        as saved; only the rate limiter's own counts are rebased.

        Raises:
          InvalidArgumentError: a bad config (see `from_config`), or items that are not valid `Item`s
            or repeat a key.
        """
        table = cls.from_config(config)
        table.load_checkpoint(items, counters)
        return table

    def load_checkpoint(self, items: Sequence[Item], counters: dict) -> None:
        """Replaces this table's items and counters by a checkpoint's (`checkpoint()` output of a
        table with this configuration), in place: writers and samplers using the table go on and
        see the restored items. Same rules as `from_checkpoint` (the rate limiter is rebased);
        blocked inserters and samplers are woken to re-check it.

        Raises:
          InvalidArgumentError: items that are not valid `Item`s or repeat a key (the table is
            unchanged then).
          CancelledError: the table is closed.
        """
        items = list(items)
        keys = set()
        with self._lock:  # the checkpoint's items settle the column modes afresh
            self._column_modes = None
            self._fitting_layouts, self._fitting_spans = set(), weakref.WeakKeyDictionary()
        for item in items:
            self._validate_item(item)
            if item.key in keys:
                raise errors.InvalidArgumentError(f"table {self.name!r}: checkpoint repeats item key {item.key}")
            keys.add(item.key)
        with self._lock:
            self._check_open()
            self._sampler.clear()
            self._remover.clear()
            self._rate_limiter.reset()
            for extension in self._extensions:
                extension.on_reset()
            self._items = {item.key: item for item in items}
            self._episode_refs = {}
            exhaust(map(self._reference_episodes_locked, items))
            pairs = [(item.key, item.priority) for item in items]
            self._sampler.insert_many(pairs)
            self._remover.insert_many(pairs)
            for item in items:
                for extension in self._extensions:
                    extension.on_insert(item)
            evictions = 0
            while len(self._items) > self.max_size:
                victim, _ = self._remover.sample()
                self._remove_locked(victim)
                evictions += 1
            for name in _COUNTERS:
                setattr(self, "_" + name, int(counters.get(name, 0)))
            self._num_evictions += evictions
            for extension, state in zip(self._extensions, counters.get("extensions", [])):
                extension.restore_state(state)
            self._rebase_rate_limiter_locked()
            self._wake_inserters()
            self._wake_samplers()

    def _rebase_rate_limiter_locked(self) -> None:
        limiter = self._rate_limiter
        n = len(self._items)
        spi = limiter.samples_per_insert
        target = n * spi
        if n >= limiter.min_size_to_sample:
            target = max(target, limiter.min_diff + 1)
        target = min(target, limiter.max_diff)
        if math.isinf(target):  # degenerate bounds: keep the natural cursor
            target = n * spi
        sample_count = math.floor(n * spi - target)
        limiter.restore(n, sample_count, 0)
