"""`Repeated`: a gymnasium space of lists of 0 to `max_len` values of one child space (classic
RLlib's `utils.spaces.repeated.Repeated`, e.g. the players around an agent)."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium

from tfrl import errors


class Repeated(gymnasium.Space):
    """Lists of 0 to `max_len` values of `child_space`.

    `sample()` draws a length of 1 to `max_len` (as classic RLlib did) and that many child
    samples; `contains(x)` holds for a list (or tuple) of at most `max_len` child values.

    Raises:
      UnsupportedSpaceError: `child_space` is not a gymnasium space or `max_len` is below 1.
    """

    def __init__(self, child_space: gymnasium.Space, max_len: int,
                 seed: Optional[int] = None):
        if not isinstance(child_space, gymnasium.Space):
            raise errors.UnsupportedSpaceError(
                f"Repeated needs a gymnasium space as its child space, got {child_space!r}")
        if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
            raise errors.UnsupportedSpaceError(
                f"Repeated needs max_len to be an int of at least 1, got {max_len!r}")
        self.child_space = child_space
        self.max_len = max_len
        super().__init__(None, None, seed)

    def seed(self, seed: Optional[int] = None) -> tuple:
        """Seeds the length draws and, from a seed drawn from them, the child space; returns
        (this space's seed, what the child's `seed` returned)."""
        used = super().seed(seed)
        return used, self.child_space.seed(int(self.np_random.integers(2**31 - 1)))

    def sample(self, mask: Any = None, probability: Any = None) -> list:
        if mask is not None or probability is not None:
            raise errors.UnsupportedSpaceError("Repeated.sample takes no mask or probability")
        length = int(self.np_random.integers(1, self.max_len + 1))
        return [self.child_space.sample() for _ in range(length)]

    def contains(self, x: Any) -> bool:
        return (isinstance(x, (list, tuple)) and len(x) <= self.max_len
                and all(self.child_space.contains(item) for item in x))

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def to_jsonable(self, sample_n) -> list:
        return [self.child_space.to_jsonable(list(sample)) for sample in sample_n]

    def from_jsonable(self, sample_n) -> list:
        return [self.child_space.from_jsonable(sample) for sample in sample_n]

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Repeated) and self.max_len == other.max_len
                and self.child_space == other.child_space)

    def __repr__(self) -> str:
        return f"Repeated({self.child_space!r}, max_len={self.max_len})"

