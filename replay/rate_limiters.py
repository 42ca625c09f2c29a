"""Rate limiters: when a table lets an insert or a sample proceed (Reverb's semantics).

A rate limiter counts inserts, samples and deletes and keeps the cursor
`inserts * samples_per_insert - samples` inside [min_diff, max_diff]:

- an insert of n items may proceed while the table holds at most `min_size_to_sample` items
  after it (size + n <= min_size_to_sample, rate_limiter.cc CanInsert), or otherwise while
  (inserts + n) * samples_per_insert - samples <= max_diff;
- a sample of n items may proceed when size >= min_size_to_sample and
  inserts * samples_per_insert - (samples + n) >= min_diff.

The owning `replay.table.Table` does the waiting (condition variables on its lock) and calls the
predicates and counters here under that lock; this module holds no lock of its own. A rate
limiter belongs to exactly one table.

Kinds: `MinSize(n)`, `SampleToInsertRatio(samples_per_insert, min_size_to_sample, error_buffer)`,
`Queue(size)`, `Stack(size)`, all built on `RateLimiter`.
"""
from __future__ import annotations

import math
import sys
from typing import Tuple, Union

from replay import errors

_INF = float("inf")


def _number(name: str, value, kind: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgumentError(f"{kind}: {name} must be a number, got {value!r}") from e
    if math.isnan(number):
        raise errors.InvalidArgumentError(f"{kind}: {name} must be a number, got NaN")
    return number


def _positive_int(name: str, value, kind: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
        raise errors.InvalidArgumentError(
            f"{kind}: {name} must be a positive integer, got {value!r}; pass a value >= 1")
    return int(value)


class _CallStats:
    """Reverb's per-operation counters of a rate limiter (`insert_stats`, `sample_stats`)."""

    __slots__ = ("completed",)

    def __init__(self, completed: int):
        self.completed = completed

    def __repr__(self) -> str:
        return f"CallStats(completed={self.completed})"


class RateLimiterInfo(dict):
    """A rate limiter's settings and counters: a dict (JSON-able) whose keys also read as
    attributes, plus Reverb's `insert_stats.completed` / `sample_stats.completed`."""

    def __getattr__(self, name: str):
        if name == "insert_stats":
            return _CallStats(self.get("insert_count", 0))
        if name == "sample_stats":
            return _CallStats(self.get("sample_count", 0))
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"rate limiter info has no field {name!r}") from None


class RateLimiter:
    """Keeps inserts * samples_per_insert - samples within [min_diff, max_diff].

    Raises (constructor):
      InvalidArgumentError: samples_per_insert not a positive finite number, min_size_to_sample
        not a positive integer, or min_diff > max_diff.
    """

    def __init__(self, samples_per_insert: float, min_size_to_sample: int, min_diff: float, max_diff: float):
        kind = type(self).__name__
        self.samples_per_insert = _number("samples_per_insert", samples_per_insert, kind)
        if not 0.0 < self.samples_per_insert < _INF:
            raise errors.InvalidArgumentError(
                f"{kind}: samples_per_insert must be a positive finite number, got {samples_per_insert!r}")
        self.min_size_to_sample = _positive_int("min_size_to_sample", min_size_to_sample, kind)
        self.min_diff = _number("min_diff", min_diff, kind)
        self.max_diff = _number("max_diff", max_diff, kind)
        if self.min_diff > self.max_diff:
            raise errors.InvalidArgumentError(
                f"{kind}: min_diff ({self.min_diff}) must not exceed max_diff ({self.max_diff}); "
                "otherwise no insert or sample could ever proceed")
        self.insert_count = 0
        self.sample_count = 0
        self.delete_count = 0
        self.owner = None  # name of the table using this rate limiter

    # -- predicates (called under the table's lock) -------------------------------------------

    def cursor(self) -> float:
        return self.insert_count * self.samples_per_insert - self.sample_count

    def can_insert(self, size: int, num_inserts: int = 1) -> bool:
        if size + num_inserts <= self.min_size_to_sample:  # until min size is reached, inserts are free
            return True
        return (self.insert_count + num_inserts) * self.samples_per_insert - self.sample_count <= self.max_diff

    def can_sample(self, size: int, num_samples: int = 1) -> bool:
        if size < self.min_size_to_sample:
            return False
        return self.insert_count * self.samples_per_insert - self.sample_count - num_samples >= self.min_diff

    def insert_blocker(self, size: int, num_inserts: int = 1) -> str:
        """Says why an insert cannot proceed, with the numbers (for timeout messages)."""
        after = (self.insert_count + num_inserts) * self.samples_per_insert - self.sample_count
        return (f"the insert would move the rate limiter's cursor (inserts * samples_per_insert - samples) "
                f"to {after:g}, above max_diff {self.max_diff:g} (inserts {self.insert_count}, samples "
                f"{self.sample_count}, samples_per_insert {self.samples_per_insert:g}, table size {size}); "
                "inserts wait for samples")

    def sample_blocker(self, size: int, num_samples: int = 1) -> str:
        """Says why a sample cannot proceed, with the numbers (for timeout messages)."""
        if size < self.min_size_to_sample:
            return (f"the table holds {size} items, fewer than min_size_to_sample {self.min_size_to_sample}; "
                    "samples wait for inserts")
        after = self.cursor() - num_samples
        return (f"the sample would move the rate limiter's cursor (inserts * samples_per_insert - samples) "
                f"to {after:g}, below min_diff {self.min_diff:g} (inserts {self.insert_count}, samples "
                f"{self.sample_count}, samples_per_insert {self.samples_per_insert:g}); samples wait for inserts")

    # -- counters --------------------------------------------------------------------------

    def insert(self, n: int = 1) -> None:
        self.insert_count += n

    def sample(self, n: int = 1) -> None:
        self.sample_count += n

    def delete(self, n: int = 1) -> None:
        self.delete_count += n

    def reset(self) -> None:
        self.insert_count = self.sample_count = self.delete_count = 0

    def restore(self, insert_count: int, sample_count: int, delete_count: int) -> None:
        self.insert_count, self.sample_count, self.delete_count = insert_count, sample_count, delete_count

    # -- description -------------------------------------------------------------------------

    def info(self) -> "RateLimiterInfo":
        return RateLimiterInfo({
            "samples_per_insert": self.samples_per_insert,
            "min_size_to_sample": self.min_size_to_sample,
            "min_diff": self.min_diff,
            "max_diff": self.max_diff,
            "insert_count": self.insert_count,
            "sample_count": self.sample_count,
            "delete_count": self.delete_count,
        })

    def config(self) -> dict:
        """JSON-able arguments; `rate_limiter_from_config` rebuilds an equivalent (fresh) limiter.
        Infinite bounds are written as the strings "inf"/"-inf" (JSON has no infinity)."""
        return {
            "kind": "RateLimiter",
            "samples_per_insert": self.samples_per_insert,
            "min_size_to_sample": self.min_size_to_sample,
            "min_diff": _encode_bound(self.min_diff),
            "max_diff": _encode_bound(self.max_diff),
        }

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(samples_per_insert={self.samples_per_insert:g}, min_size_to_sample="
                f"{self.min_size_to_sample}, min_diff={self.min_diff:g}, max_diff={self.max_diff:g})")


def _encode_bound(value: float):
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


class MinSize(RateLimiter):
    """Blocks sampling until the table holds `min_size_to_sample` items; never blocks inserts.

    Its bounds are the largest finite floats (as Reverb's, so that `info()` reports the same)."""

    def __init__(self, min_size_to_sample: int):
        _positive_int("min_size_to_sample", min_size_to_sample, "MinSize")
        super().__init__(1.0, min_size_to_sample, -sys.float_info.max, sys.float_info.max)

    def config(self):
        return {"kind": "MinSize", "min_size_to_sample": self.min_size_to_sample}


class SampleToInsertRatio(RateLimiter):
    """Keeps the average number of samples per insert near `samples_per_insert`.

    `error_buffer` is either a number b, giving bounds samples_per_insert * min_size_to_sample -/+ b,
    or a (min_diff, max_diff) pair.

    Raises (constructor):
      InvalidArgumentError: samples_per_insert <= 0, min_size_to_sample < 1, or a buffer narrower than
        2 * max(1, samples_per_insert) (such a buffer can block inserts and samples forever).
    """

    def __init__(self, samples_per_insert: float, min_size_to_sample: int,
                 error_buffer: Union[float, Tuple[float, float]]):
        kind = "SampleToInsertRatio"
        spi = _number("samples_per_insert", samples_per_insert, kind)
        if not 0.0 < spi < _INF:
            raise errors.InvalidArgumentError(
                f"{kind}: samples_per_insert must be a positive finite number, got {samples_per_insert!r}")
        min_size = _positive_int("min_size_to_sample", min_size_to_sample, kind)
        if isinstance(error_buffer, (tuple, list)):
            if len(error_buffer) != 2:
                raise errors.InvalidArgumentError(
                    f"{kind}: error_buffer must be a number or a (min_diff, max_diff) pair, got {error_buffer!r}")
            min_diff = _number("error_buffer[0] (min_diff)", error_buffer[0], kind)
            max_diff = _number("error_buffer[1] (max_diff)", error_buffer[1], kind)
        else:
            buffer = _number("error_buffer", error_buffer, kind)
            if buffer < 0:
                raise errors.InvalidArgumentError(f"{kind}: error_buffer must be >= 0, got {error_buffer!r}")
            offset = spi * min_size
            min_diff, max_diff = offset - buffer, offset + buffer
        if max_diff - min_diff < 2 * max(1.0, spi):
            raise errors.InvalidArgumentError(
                f"{kind}: the error buffer [{min_diff:g}, {max_diff:g}] is {max_diff - min_diff:g} wide, but it must "
                f"be at least 2 * max(1, samples_per_insert) = {2 * max(1.0, spi):g} wide; a narrower buffer can "
                "block inserts and samples forever. Pass a larger error_buffer")
        if min_diff > spi * min_size:
            raise errors.InvalidArgumentError(
                f"{kind}: the error buffer [{min_diff:g}, {max_diff:g}] lies above samples_per_insert * "
                f"min_size_to_sample = {spi * min_size:g}; sampling would block forever once "
                f"min_size_to_sample items are in the table. Lower error_buffer's lower bound")
        self.error_buffer = (list(error_buffer) if isinstance(error_buffer, (tuple, list))
                             else float(error_buffer))
        super().__init__(spi, min_size, min_diff, max_diff)

    def config(self):
        return {"kind": "SampleToInsertRatio", "samples_per_insert": self.samples_per_insert,
                "min_size_to_sample": self.min_size_to_sample, "error_buffer": self.error_buffer}


class Queue(RateLimiter):
    """A queue of at most `size` items: inserts block when full, samples when empty. Use with
    Fifo/Fifo selectors and max_times_sampled=1 (`Table.queue`)."""

    def __init__(self, size: int):
        size = _positive_int("size", size, type(self).__name__)
        super().__init__(1.0, 1, 0.0, float(size))
        self.size = size

    def config(self):
        return {"kind": type(self).__name__, "size": self.size}


class Stack(Queue):
    """A stack of at most `size` items: like `Queue`, used with Lifo/Lifo (`Table.stack`)."""


_KINDS = {"RateLimiter": RateLimiter, "MinSize": MinSize, "SampleToInsertRatio": SampleToInsertRatio,
          "Queue": Queue, "Stack": Stack}


def _decode_bound(value):
    if isinstance(value, str) and value in ("inf", "-inf", "+inf"):
        return float(value)
    return value


def rate_limiter_from_config(config: dict) -> RateLimiter:
    """Builds a fresh rate limiter from `RateLimiter.config()` output.

    Raises:
      InvalidArgumentError: not a dict, an unknown kind, missing or unknown arguments, or arguments
        the rate limiter rejects.
    """
    if not isinstance(config, dict) or "kind" not in config:
        raise errors.InvalidArgumentError(
            f"rate limiter config must be a dict with a 'kind' (one of {sorted(_KINDS)}), got {config!r}")
    cls = _KINDS.get(config["kind"])
    if cls is None:
        raise errors.InvalidArgumentError(
            f"unknown rate limiter kind {config['kind']!r}; use one of {sorted(_KINDS)}")
    kwargs = {k: v for k, v in config.items() if k != "kind"}
    if cls is RateLimiter:
        for bound in ("min_diff", "max_diff"):
            if bound in kwargs:
                kwargs[bound] = _decode_bound(kwargs[bound])
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise errors.InvalidArgumentError(f"rate limiter {config['kind']}: bad arguments {kwargs}: {e}") from e
