"""Publishing the learner's weights to rollout actors: through Ray's object store or through a
replay table of size 1 (Reverb's variable-container pattern).

This is the last arrow, "new weights -> actors". `RayWeightsPublisher` puts
each version in the object store once (`ray.put`) so any number of actors fetch it without the
driver copying it again. `ReplayWeightsPublisher` inserts each version into a replay table that
holds one item (`variable_container_table`: max_size 1, Fifo remover, MinSize(1), never deleted
by sampling), so actors that only have a replay address read the newest weights with
`ReplayWeightsReader` and never block once a first version exists.
See docs/architecture.md, "Policy copies and weights".
"""
from __future__ import annotations

import threading
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import tree

from replay import errors as replay_errors
from replay import rate_limiters, selectors
from replay.table import Table
from tfrl import errors

VERSION_KEY = "version"
WEIGHTS_KEY = "weights"


def variable_container_table(name: str = "weights", signature: Any = None) -> Table:
    """A table holding only the newest published weights: one item, replaced on each insert,
    sampled any number of times without being removed.

    Raises:
      InvalidArgumentError (replay): a bad name or signature.
    """
    return Table(name, sampler=selectors.Fifo(), remover=selectors.Fifo(), max_size=1,
                 rate_limiter=rate_limiters.MinSize(1), max_times_sampled=0, signature=signature)


def _as_weight_list(weights: Sequence[Any]) -> List[np.ndarray]:
    if weights is None or isinstance(weights, (str, bytes, dict)):
        raise errors.InvalidConfigError(
            f"weights must be a list of arrays (as policy.get_weights() returns), got {type(weights).__name__}")
    arrays = [np.asarray(w) for w in weights]
    if not arrays:
        raise errors.InvalidConfigError("cannot publish an empty list of weights")
    if any(a.dtype.hasobject for a in arrays):
        raise errors.InvalidConfigError("weights must be numeric arrays, not Python objects")
    return arrays


class RayWeightsPublisher:
    """Keeps the newest weights in Ray's object store: `publish` returns the `ObjectRef` to
    hand to actors (`worker.set_weights.remote(ref)` resolves it in the actor)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.version = 0
        self.latest_ref = None

    def publish(self, weights: Sequence[Any]):
        """Puts `weights` in the object store as a new version; returns its ObjectRef.

        Raises:
          InvalidConfigError: `weights` is not a non-empty list of numeric arrays.
        """
        import ray

        arrays = _as_weight_list(weights)
        ref = ray.put(arrays)
        with self._lock:
            self.version += 1
            self.latest_ref = ref
        return ref


class ReplayWeightsPublisher:
    """Inserts each published version into a variable-container table (see
    `variable_container_table`) through a `replay.Client`."""

    def __init__(self, client, table: str = "weights"):
        self.client = client
        self.table = table
        self.version = 0

    def publish(self, weights: Sequence[Any], timeout: Optional[float] = None) -> int:
        """Inserts `weights` as the next version and returns that version number (from 1).

        Raises:
          InvalidConfigError: `weights` is not a non-empty list of numeric arrays.
          replay.errors.ReplayError: the insert failed (unknown table, signature mismatch, no
            server); the version number is not advanced.
        """
        arrays = _as_weight_list(weights)
        version = self.version + 1
        self.client.insert({VERSION_KEY: np.int64(version), WEIGHTS_KEY: arrays}, {self.table: 1.0},
                           timeout=timeout)
        self.version = version
        return version


class ReplayWeightsReader:
    """What an actor uses to read the newest weights from a variable-container table."""

    def __init__(self, client, table: str = "weights"):
        self.client = client
        self.table = table
        self.version = 0

    def read(self, timeout: Optional[float] = None) -> Tuple[int, List[np.ndarray]]:
        """The newest (version, weights).

        Raises:
          replay.errors.DeadlineExceededError: nothing was published within `timeout` seconds
            (None waits for the first version).
          replay.errors.ReplayError: other failures (unknown table, no server).
        """
        # Each version is an item of one step (`Client.insert`): sampled as its one step.
        [step] = next(self.client.sample(self.table, 1, timeout=timeout, unpack_as_table_signature=True))
        version, weights = _unpack(step.data)
        self.version = version
        return version, weights

    def read_if_newer(self, timeout: Optional[float] = None) -> Optional[List[np.ndarray]]:
        """The newest weights if they are newer than the last ones read, else None (also None
        when nothing was published within `timeout`).

        Raises:
          replay.errors.ReplayError: failures other than the timeout.
        """
        previous = self.version
        try:
            version, weights = self.read(timeout)
        except replay_errors.DeadlineExceededError:
            return None
        return weights if version > previous else None


def _unpack(data: Any) -> Tuple[int, List[np.ndarray]]:
    if isinstance(data, dict):
        return int(data[VERSION_KEY]), [np.asarray(w) for w in tree.flatten(data[WEIGHTS_KEY])]
    # A table without a signature gives the flat columns: the version sorts before the weights.
    flat = list(data)
    return int(flat[0]), [np.asarray(w) for w in flat[1:]]
