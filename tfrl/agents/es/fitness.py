"""Fitness shaping of evolution strategies: returns of antithetic pairs -> weight per pair.

ES (Salimans et al.) ranks all 2N returns of an iteration, maps the ranks to [-0.5, 0.5]
(`compute_centered_ranks`) and weights perturbation i by rank(+) - rank(-). ARS (Mania et al.)
keeps the top-b directions by max(r+, r-) and weights them by r+ - r-, divided by the standard
deviation of those 2b returns (`top_directions_weights`). Both return the weights the update
direction sum_i w_i epsilon_i is built from, so the aggregation tree serves both.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from tfrl import errors


def compute_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks in [0, len(x)) (ties broken by position)."""
    ranks = np.empty(len(x), dtype=np.int64)
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    return ranks


def compute_centered_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of all entries of `x` (any shape) scaled to [-0.5, 0.5], in `x`'s shape."""
    x = np.asarray(x, np.float64)
    if x.size < 2:
        return np.zeros(x.shape, np.float32)
    y = compute_ranks(x.ravel()).reshape(x.shape).astype(np.float32)
    return y / (x.size - 1) - 0.5


def centered_rank_weights(returns: np.ndarray) -> np.ndarray:
    """ES: weight of each antithetic pair, rank(r+) - rank(r-), from `returns` of shape [N, 2].

    Raises:
      InvalidBatchError: returns not of shape [N, 2].
    """
    returns = _pairs(returns)
    ranks = compute_centered_ranks(returns)
    return (ranks[:, 0] - ranks[:, 1]).astype(np.float64)


def top_directions_weights(returns: np.ndarray, num_top: Optional[int]) -> np.ndarray:
    """ARS (V1-t/V2-t): (r+ - r-) / sigma_R for the `num_top` pairs with the largest
    max(r+, r-), 0 for the others; sigma_R is the standard deviation of the kept 2b returns.
    `num_top` None keeps every pair.

    Raises:
      InvalidBatchError: returns not of shape [N, 2].
    """
    returns = _pairs(returns)
    n = len(returns)
    b = n if num_top is None else max(1, min(int(num_top), n))
    keep = np.argsort(-returns.max(axis=1), kind="stable")[:b]
    sigma = float(returns[keep].std())
    weights = np.zeros(n, np.float64)
    weights[keep] = (returns[keep, 0] - returns[keep, 1]) / (sigma if sigma > 1e-8 else 1.0)
    return weights


def _pairs(returns) -> np.ndarray:
    returns = np.asarray(returns, np.float64)
    if returns.ndim != 2 or returns.shape[1] != 2:
        raise errors.InvalidBatchError(
            f"returns of antithetic pairs must have shape [N, 2] (r+, r-), got {returns.shape}")
    return returns


SHAPINGS = ("centered_ranks", "top_directions")


def shape_fitness(returns: np.ndarray, shaping: str, num_top: Optional[int] = None) -> np.ndarray:
    """The pair weights of `shaping` ("centered_ranks" or "top_directions").

    Raises:
      InvalidConfigError: an unknown shaping.
      InvalidBatchError: returns not of shape [N, 2].
    """
    if shaping == "centered_ranks":
        return centered_rank_weights(returns)
    if shaping == "top_directions":
        return top_directions_weights(returns, num_top)
    raise errors.InvalidConfigError(f"unknown fitness shaping {shaping!r}; use one of {SHAPINGS}")
