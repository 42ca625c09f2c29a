"""Item selectors: which item a table samples next, and which one it evicts.

A table has two selectors (Reverb's "sampler" and "remover"). Each one tracks the keys and
priorities of the table's items and picks one key when asked, reporting the probability it picked
it with. Selectors are not thread-safe on their own: the owning `replay.table.Table` calls them
under its lock. They sit in the hot path of the replay server, so every operation is O(log n) or
better and keeps its Python work small.

Kinds: `Fifo`, `Lifo`, `Uniform`, `Prioritized(priority_exponent)`, `MaxHeap`, `MinHeap`.
`selector_from_options(selector.options())` rebuilds a selector (used by checkpoints and the
server's YAML configuration).
"""
from __future__ import annotations

import collections
import heapq
import itertools
import operator
import random
from typing import Iterable, Sequence, Tuple, Union

from replay import errors

# Bulk selector updates run their per-key calls through map() (C loops, no Python frame each).
_first = operator.itemgetter(0)  # the key of a (key, priority) pair
exhaust = collections.deque(maxlen=0).extend  # runs an iterator of calls to its end, keeping nothing

_INF = float("inf")

Seed = Union[None, int, random.Random]


def _make_rng(seed: Seed) -> random.Random:
    if isinstance(seed, random.Random):
        return seed
    return random.Random(seed)


def check_priority(key: int, priority: float) -> float:
    """Returns `priority` as a float.

    Raises:
      InvalidArgumentError: the priority is not a number, negative, NaN or infinite.
    """
    try:
        value = float(priority)
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgumentError(
            f"item {key}: priority must be a number, got {priority!r}") from e
    if not 0.0 <= value < _INF:  # also false for NaN
        raise errors.InvalidArgumentError(
            f"item {key}: priority must be a finite number >= 0, got {value}; pass a non-negative "
            "finite priority")
    return value


class ItemSelector:
    """Base class. Keys are unique: the table calls `insert` for new keys and `update` for known ones.

    Subclasses implement the hot-path methods; the base class documents the contract.
    """

    def insert(self, key: int, priority: float) -> None:
        """Adds a new key. The caller guarantees the key is not present and the priority valid."""
        raise NotImplementedError

    def insert_many(self, keys_and_priorities: Iterable[Tuple[int, float]]) -> None:
        """Adds many new keys in order (a bulk path for restores and benchmarks)."""
        for key, priority in keys_and_priorities:
            self.insert(key, priority)

    def replace_many(self, old_keys: Sequence[int], new_keys_and_priorities: Sequence[Tuple[int, float]]) -> None:
        """For each pair in order, `insert` the new key, then `delete` the old one (what a full
        table does per insert when it evicts `old`); selectors override it with a bulk path
        that ends in the same state."""
        for old, (key, priority) in zip(old_keys, new_keys_and_priorities):
            self.insert(key, priority)
            self.delete(old)

    def update(self, key: int, priority: float) -> None:
        """Changes the priority of a present key."""
        raise NotImplementedError

    def delete(self, key: int) -> None:
        """Removes a present key."""
        raise NotImplementedError

    def sample(self) -> Tuple[int, float]:
        """Returns (key, probability this key was chosen with). The selector must not be empty."""
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def validate_priority(self, key: int, priority: float) -> float:
        """Checks a priority before anything changes; returns it as a float.

        Raises:
          InvalidArgumentError: negative, NaN or infinite priority (or unusable by this selector).
        """
        return check_priority(key, priority)

    def options(self) -> dict:
        """JSON-able description; `selector_from_options` rebuilds the selector from it."""
        return {"kind": type(self).__name__}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options().items() if k != "kind")
        return f"{type(self).__name__}({args})"


class _OrderedSelector(ItemSelector):
    """Shared storage of Fifo and Lifo: an ordered dict gives O(1) ends and O(1) middle deletion."""

    def __init__(self):
        self._keys = collections.OrderedDict()

    def insert(self, key, priority):
        self._keys[key] = None

    def insert_many(self, keys_and_priorities):
        self._keys.update(dict.fromkeys(map(_first, keys_and_priorities)))

    def replace_many(self, old_keys, new_keys_and_priorities):
        keys = self._keys
        exhaust(map(keys.__delitem__, old_keys))
        keys.update(dict.fromkeys(map(_first, new_keys_and_priorities)))

    def update(self, key, priority):
        pass  # order depends on insertion only

    def delete(self, key):
        del self._keys[key]

    def clear(self):
        self._keys.clear()

    def __len__(self):
        return len(self._keys)


class Fifo(_OrderedSelector):
    """Selects the oldest inserted item (probability 1)."""

    def sample(self):
        return next(iter(self._keys)), 1.0

    def oldest(self, count: int) -> list:
        """The `count` oldest keys, oldest first: what `count` samples, each followed by deleting
        the sampled key, select."""
        return list(itertools.islice(self._keys, count))


class Lifo(_OrderedSelector):
    """Selects the newest inserted item (probability 1)."""

    def sample(self):
        return next(reversed(self._keys)), 1.0


class Uniform(ItemSelector):
    """Selects every item with probability 1/n (array of keys plus index map, swap-remove)."""

    def __init__(self, seed: Seed = None):
        self._rng = _make_rng(seed)
        self._keys = []
        self._index = {}

    def insert(self, key, priority):
        self._index[key] = len(self._keys)
        self._keys.append(key)

    def insert_many(self, keys_and_priorities):
        keys = list(map(_first, keys_and_priorities))
        self._index.update(zip(keys, range(len(self._keys), len(self._keys) + len(keys))))
        self._keys.extend(keys)

    def replace_many(self, old_keys, new_keys_and_priorities):
        # insert(new) then delete(old) moves the new key, last in the array, into the old one's
        # slot: so each new key takes its old key's slot
        keys, index = self._keys, self._index
        slots = list(map(index.pop, old_keys))
        new_keys = list(map(_first, new_keys_and_priorities))
        exhaust(map(keys.__setitem__, slots, new_keys))
        index.update(zip(new_keys, slots))

    def update(self, key, priority):
        pass

    def delete(self, key):
        index = self._index.pop(key)
        last = self._keys.pop()
        if last != key:
            self._keys[index] = last
            self._index[last] = index

    def sample(self):
        keys = self._keys
        n = len(keys)
        return keys[int(self._rng.random() * n)], 1.0 / n

    def clear(self):
        self._keys.clear()
        self._index.clear()

    def __len__(self):
        return len(self._keys)


class Prioritized(ItemSelector):
    """Selects item i with probability p_i^a / sum_k p_k^a (a = `priority_exponent`; an item of
    priority 0 weighs 0, even with a = 0).

    An array-based sum tree: leaves hold p^a, each inner node the sum of its two children, the
    root the total. Parents are recomputed from their children (never adjusted by differences),
    so repeated updates do not accumulate rounding drift and the reported probability is exactly
    leaf / root. The tree doubles its capacity when full. When every weight is zero (all zero
    priorities) it samples uniformly.
    """

    def __init__(self, priority_exponent: float = 1.0, seed: Seed = None):
        try:
            exponent = float(priority_exponent)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(
                f"Prioritized: priority_exponent must be a number, got {priority_exponent!r}") from e
        if not 0.0 <= exponent < _INF:
            raise errors.InvalidArgumentError(
                f"Prioritized: priority_exponent must be a finite number >= 0, got {priority_exponent}")
        self.priority_exponent = exponent
        self._rng = _make_rng(seed)
        self._capacity = 1
        self._tree = [0.0, 0.0]  # index 0 unused; leaves start at self._capacity
        self._slot_of = {}  # key -> leaf slot
        self._keys = []  # slot -> key

    def _weight(self, priority):
        if self.priority_exponent == 1.0:
            return priority
        # A zero priority weighs zero whatever the exponent (0 ** 0 would be 1), as in Reverb's
        # prioritized.cc: with exponent 0, items of priority 0 are never drawn while another
        # item has a positive priority.
        return 0.0 if priority == 0 else priority ** self.priority_exponent

    def validate_priority(self, key, priority):
        value = check_priority(key, priority)
        try:
            weight = self._weight(value)
        except OverflowError:
            weight = _INF
        if weight == _INF:
            raise errors.InvalidArgumentError(
                f"item {key}: priority {value} raised to priority_exponent {self.priority_exponent} "
                "overflows a float; use a smaller priority")
        return value

    def _grow(self, capacity):
        old_capacity, old_tree = self._capacity, self._tree
        tree = [0.0] * (2 * capacity)
        tree[capacity:capacity + old_capacity] = old_tree[old_capacity:2 * old_capacity]
        self._capacity, self._tree = capacity, tree
        self._rebuild_inner()

    def _rebuild_inner(self):
        tree = self._tree
        for i in range(self._capacity - 1, 0, -1):
            tree[i] = tree[2 * i] + tree[2 * i + 1]

    def _set(self, slot, weight):
        tree = self._tree
        i = slot + self._capacity
        tree[i] = weight
        i >>= 1
        while i:
            tree[i] = tree[2 * i] + tree[2 * i + 1]
            i >>= 1

    def insert(self, key, priority):
        slot = len(self._keys)
        if slot == self._capacity:
            self._grow(2 * self._capacity)
        self._keys.append(key)
        self._slot_of[key] = slot
        self._set(slot, self._weight(priority))

    def insert_many(self, keys_and_priorities):
        pairs = list(keys_and_priorities)
        if len(pairs) < 64:
            return super().insert_many(pairs)
        start = len(self._keys)
        capacity = self._capacity
        while capacity < start + len(pairs):
            capacity *= 2
        if capacity != self._capacity:
            self._grow(capacity)
        tree, base = self._tree, self._capacity + start
        for offset, (key, priority) in enumerate(pairs):
            self._slot_of[key] = start + offset
            self._keys.append(key)
            tree[base + offset] = self._weight(priority)
        self._rebuild_inner()

    def update(self, key, priority):
        self._set(self._slot_of[key], self._weight(priority))

    def delete(self, key):
        slot = self._slot_of.pop(key)
        last_slot = len(self._keys) - 1
        last_key = self._keys.pop()
        if slot != last_slot:
            # Move the last leaf into the freed slot so leaves stay dense.
            self._keys[slot] = last_key
            self._slot_of[last_key] = slot
            self._set(slot, self._tree[last_slot + self._capacity])
        self._set(last_slot, 0.0)

    def sample(self):
        tree, capacity = self._tree, self._capacity
        total = tree[1]
        n = len(self._keys)
        if not total > 0.0:
            return self._keys[int(self._rng.random() * n)], 1.0 / n
        target = self._rng.random() * total
        i = 1
        while i < capacity:
            left = tree[2 * i]
            if target < left:
                i = 2 * i
            else:
                right = tree[2 * i + 1]
                if right > 0.0:
                    target -= left
                    i = 2 * i + 1
                else:  # rounding pushed the target past the last positive weight
                    i = 2 * i
        # Every step above enters a child of positive weight, so the leaf is a live one.
        return self._keys[i - capacity], tree[i] / total

    def probability(self, key: int) -> float:
        """The probability `sample` would pick `key` now (for tests and diagnostics)."""
        total = self._tree[1]
        if not total > 0.0:
            return 1.0 / len(self._keys)
        return self._tree[self._slot_of[key] + self._capacity] / total

    def clear(self):
        self._capacity = 1
        self._tree = [0.0, 0.0]
        self._slot_of.clear()
        self._keys.clear()

    def __len__(self):
        return len(self._keys)

    def options(self):
        return {"kind": "Prioritized", "priority_exponent": self.priority_exponent}


class _Heap(ItemSelector):
    """A binary heap with lazy deletion: updates push a fresh entry and stale entries are dropped
    when they reach the top or when stale entries outnumber live ones (then the heap is rebuilt).

    Entries are (sign * priority, update_counter, key): among equal priorities the entry with the
    smallest counter, the least recently inserted or updated item, comes first.
    """

    _sign = 1.0

    def __init__(self):
        self._heap = []
        self._live = {}  # key -> (priority, counter) of its current entry
        self._counter = 0

    def insert(self, key, priority):
        self._counter += 1
        self._live[key] = (priority, self._counter)
        heapq.heappush(self._heap, (self._sign * priority, self._counter, key))
        self._maybe_compact()

    def insert_many(self, keys_and_priorities):
        for key, priority in keys_and_priorities:
            self._counter += 1
            self._live[key] = (priority, self._counter)
            self._heap.append((self._sign * priority, self._counter, key))
        heapq.heapify(self._heap)

    update = insert

    def delete(self, key):
        del self._live[key]
        self._maybe_compact()

    def _maybe_compact(self):
        if len(self._heap) > 2 * len(self._live) + 64:
            sign = self._sign
            self._heap = [(sign * p, c, k) for k, (p, c) in self._live.items()]
            heapq.heapify(self._heap)

    def sample(self):
        heap, live = self._heap, self._live
        while True:
            _, counter, key = heap[0]
            current = live.get(key)
            if current is not None and current[1] == counter:
                return key, 1.0
            heapq.heappop(heap)

    def clear(self):
        self._heap.clear()
        self._live.clear()

    def __len__(self):
        return len(self._live)


class MaxHeap(_Heap):
    """Selects the item with the highest priority (probability 1)."""

    _sign = -1.0


class MinHeap(_Heap):
    """Selects the item with the lowest priority (probability 1)."""

    _sign = 1.0


_KINDS = {cls.__name__: cls for cls in (Fifo, Lifo, Uniform, Prioritized, MaxHeap, MinHeap)}


def selector_from_options(options: dict) -> ItemSelector:
    """Builds a selector from `ItemSelector.options()` output, e.g. {"kind": "Prioritized",
    "priority_exponent": 0.8}. Uniform and Prioritized also accept an optional integer "seed".

    Raises:
      InvalidArgumentError: not a dict, an unknown kind, or bad or unknown arguments.
    """
    if not isinstance(options, dict) or "kind" not in options:
        raise errors.InvalidArgumentError(
            f"selector options must be a dict with a 'kind' (one of {sorted(_KINDS)}), got {options!r}")
    kind = options["kind"]
    cls = _KINDS.get(kind)
    if cls is None:
        raise errors.InvalidArgumentError(
            f"unknown selector kind {kind!r}; use one of {sorted(_KINDS)}")
    kwargs = {k: v for k, v in options.items() if k != "kind"}
    allowed = {"Prioritized": {"priority_exponent", "seed"}, "Uniform": {"seed"}}.get(kind, set())
    unknown = set(kwargs) - allowed
    if unknown:
        raise errors.InvalidArgumentError(
            f"selector {kind} does not take {sorted(unknown)}; it accepts {sorted(allowed) or 'no arguments'}")
    if "seed" in kwargs and not (kwargs["seed"] is None or isinstance(kwargs["seed"], int)):
        raise errors.InvalidArgumentError(f"selector {kind}: seed must be an integer, got {kwargs['seed']!r}")
    return cls(**kwargs)
