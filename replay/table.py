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

This module holds the table's construction and its public operations; the parts they stand on
are mixins of their own modules: the lock and its waits (`replay.table_waiting`), the checks of
incoming items (`replay.table_validation`), the stored items and their bookkeeping
(`replay.table_storage`), the configuration (`replay.table_config`), checkpoint snapshots
(`replay.table_checkpoint`), and what `info` returns (`replay.table_info`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from replay import errors, specs
from replay.extensions import TableExtension
from replay.items import Item
from replay.rate_limiters import Queue, RateLimiter, Stack
from replay.selectors import Fifo, ItemSelector, Lifo
from replay.table_checkpoint import TableCheckpoint
from replay.table_config import TableConfig
from replay.table_info import TableInfo
from replay.table_storage import ItemStorage
from replay.table_validation import ItemValidation
from replay.table_waiting import TableWaiting

__all__ = ["MAX_SAMPLES_PER_CALL", "SampledItem", "Table", "TableInfo"]


@dataclasses.dataclass
class SampledItem:
    """One sampled item and its state at the moment of sampling (times_sampled includes this sample)."""

    item: Item
    probability: float
    table_size: int
    priority: float
    times_sampled: int


# The most items one `sample` call takes while holding the table's lock: a caller asking for more
# gets this many and calls again, so no request can hold the table for long.
MAX_SAMPLES_PER_CALL = 4096


def _check_size(name: str, value, minimum: int, table: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise errors.InvalidArgumentError(
            f"table {table!r}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class Table(TableWaiting, ItemValidation, ItemStorage, TableConfig, TableCheckpoint):
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
            self._given_signature = signature  # what `info` shows, as Reverb's does
            self.signature = specs.as_signature(signature)
        except (TypeError, ValueError, AttributeError) as e:
            raise errors.InvalidArgumentError(
                f"table {name!r}: the signature must be a nest of specs with .shape and .dtype: {e}") from e
        self._init_validation(sampler, remover)
        rate_limiter.owner = name
        self._sampler = sampler
        self._remover = remover
        self._rate_limiter = rate_limiter
        self._extensions = extensions
        self._items = {}  # key -> Item, in insertion order
        self._init_waiting()
        self._num_inserts = self._num_samples = self._num_deletes = self._num_evictions = 0
        self._num_updates = 0
        self._num_unique_samples = self._num_deleted_episodes = 0
        # episode id -> chunks of present items from that episode (one per item and chunk)
        self._episode_refs: dict = {}
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

    def __repr__(self) -> str:
        return (f"Table(name={self.name!r}, size={len(self._items)}, max_size={self.max_size}, "
                f"sampler={self._sampler!r}, "
                f"remover={self._remover!r}, rate_limiter={self._rate_limiter!r})")

    # -- public operations ------------------------------------------------------------------------

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
            self._forget_column_modes_locked()
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
        also works). The signature is the one the constructor was given (`self.signature` is
        it as `replay.specs`)."""
        with self._lock:
            return TableInfo(
                name=self.name,
                current_size=len(self._items),
                max_size=self.max_size,
                max_times_sampled=self.max_times_sampled,
                sampler_options=self._sampler.options(),
                remover_options=self._remover.options(),
                rate_limiter_info=self._rate_limiter.info(),
                signature=self._given_signature,
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
