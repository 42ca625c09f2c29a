"""The shared noise table of evolution strategies (Salimans et al., 2017).

One large array of standard normal floats is made once, put once in the Ray object store, and
read by every worker and aggregator without copying (Ray maps numpy arrays of the object store
read-only into each process). A perturbation is then named by an integer offset: workers send
offsets instead of vectors, and whoever holds the table rebuilds the vector.
"""
from __future__ import annotations

import numpy as np

from tfrl import errors


def make_noise(size: int, seed: int = 123) -> np.ndarray:
    """`size` standard normal float32 values from a fixed seed.

    Raises:
      InvalidConfigError: a size below 1.
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise errors.InvalidConfigError(f"noise_size must be an integer >= 1, got {size!r}")
    return np.random.default_rng(seed).standard_normal(size, dtype=np.float32)


class SharedNoiseTable:
    """Slices of a noise array: `get(offset, dim)` is the perturbation at `offset`."""

    def __init__(self, noise: np.ndarray):
        self.noise = noise

    def get(self, offset: int, dim: int) -> np.ndarray:
        return self.noise[offset:offset + dim]

    def sample_offset(self, rng: np.random.Generator, dim: int) -> int:
        """A uniformly random offset whose slice of `dim` values lies inside the table.

        Raises:
          InvalidConfigError: a table shorter than `dim`.
        """
        if dim > len(self.noise):
            raise errors.InvalidConfigError(
                f"noise_size {len(self.noise)} is smaller than the policy's {dim} parameters; "
                "raise noise_size")
        return int(rng.integers(0, len(self.noise) - dim + 1))

    def weighted_sum(self, weights: np.ndarray, offsets: np.ndarray, dim: int) -> np.ndarray:
        """sum_i weights[i] * get(offsets[i], dim), in float64, in blocks to bound memory."""
        total = np.zeros(dim, np.float64)
        for start in range(0, len(offsets), 500):
            block = np.stack([self.get(int(o), dim) for o in offsets[start:start + 500]])
            total += np.asarray(weights[start:start + 500], np.float64) @ block.astype(np.float64)
        return total
