"""`Simplex`: a gymnasium space of points of probability simplices (classic RLlib's
`utils.spaces.simplex.Simplex`), e.g. portfolio weights as an action."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import gymnasium
import numpy as np

from tfrl import errors


class Simplex(gymnasium.Space):
    """Arrays of `shape` whose last axis is a point of the (d-1)-simplex in R^d: coordinates in
    [0, 1] that sum to 1 (d = shape[-1]; the leading axes are independent simplices).

    `sample()` draws from a Dirichlet distribution with `concentration` (one value per
    coordinate, all 1 by default: uniform on the simplex).

    Raises:
      UnsupportedSpaceError: `shape` is not a non-empty tuple/list of positive ints, or
        `concentration` is not d positive numbers.
    """

    def __init__(self, shape: Sequence[int], concentration: Optional[Sequence[float]] = None,
                 dtype: Any = np.float32, seed: Optional[int] = None):
        if not isinstance(shape, (tuple, list)) or not shape or not all(
                isinstance(n, (int, np.integer)) and n > 0 for n in shape):
            raise errors.UnsupportedSpaceError(
                f"Simplex needs shape as a non-empty tuple of positive ints, got {shape!r}")
        shape = tuple(int(n) for n in shape)
        self.dim = shape[-1]
        if concentration is None:
            concentration = np.ones(self.dim)
        concentration = np.asarray(concentration, dtype=np.float64)
        if concentration.shape != (self.dim,) or not (concentration > 0).all():
            raise errors.UnsupportedSpaceError(
                f"Simplex concentration must be {self.dim} positive numbers (one per coordinate "
                f"of the last axis), got {concentration.tolist()!r}")
        self.concentration = concentration
        super().__init__(shape, dtype, seed)

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        if mask is not None or probability is not None:
            raise errors.UnsupportedSpaceError("Simplex.sample takes no mask or probability")
        return self.np_random.dirichlet(self.concentration, size=self.shape[:-1]).astype(
            self.dtype)

    def contains(self, x: Any) -> bool:
        x = np.asarray(x)
        if x.shape != self.shape or not np.issubdtype(x.dtype, np.number):
            return False
        # float32 points sum to 1 within a few ulp per coordinate
        tolerance = 1e-5 * max(1, self.dim)
        return bool((x >= 0).all() and (x <= 1).all()
                    and np.allclose(x.sum(axis=-1), 1.0, rtol=0, atol=tolerance))

    @property
    def is_np_flattenable(self) -> bool:
        return True

    def to_jsonable(self, sample_n) -> list:
        return np.asarray(sample_n).tolist()

    def from_jsonable(self, sample_n) -> list:
        return [np.asarray(sample, dtype=self.dtype) for sample in sample_n]

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Simplex) and self.shape == other.shape
                and np.allclose(self.concentration, other.concentration))

    def __repr__(self) -> str:
        return f"Simplex({self.shape}; {self.concentration.tolist()})"
