"""Observation filters of rollout workers: NoFilter and MeanStdFilter.

A filter maps raw observations to what the policy sees. `MeanStdFilter` standardises each
observation component with a running mean and standard deviation. Each worker updates its own
copy while sampling; the driver merges every worker's updates since the last synchronisation
(`RunningStat.merge` combines two sets of statistics exactly, Chan et al.'s parallel variance)
and sends the merged statistics back (`synchronize_filters`), so all workers normalise alike.

A filter holds `running_stat`, the statistics it normalises with, and `delta`, the updates it
has seen since its last flush; only `delta` is merged into the driver's filter, so no update is
counted twice.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, Optional, Tuple

import numpy as np

from tfrl import errors


class RunningStat:
    """Count, mean and sum of squared deviations of a stream of arrays of one shape."""

    def __init__(self, shape: Tuple[int, ...] = ()):
        self.shape = tuple(shape)
        self.count = 0
        self.mean = np.zeros(self.shape, np.float64)
        self.m2 = np.zeros(self.shape, np.float64)

    def push_batch(self, batch: np.ndarray) -> None:
        """Adds the rows of `batch` (shape [n, *shape])."""
        batch = np.asarray(batch, np.float64)
        n = batch.shape[0]
        if n == 0:
            return
        batch_mean = batch.mean(axis=0)
        batch_m2 = ((batch - batch_mean) ** 2).sum(axis=0)
        self._combine(n, batch_mean, batch_m2)

    def merge(self, other: "RunningStat") -> None:
        """Adds everything `other` has seen, as if its rows had been pushed here."""
        if other.shape != self.shape:
            raise errors.InvalidConfigError(
                f"cannot merge running statistics of shape {other.shape} into shape {self.shape}; "
                "filters of different observation spaces were mixed")
        self._combine(other.count, other.mean, other.m2)

    def _combine(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        if n == 0:
            return
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta ** 2 * (self.count * n / total)
        self.count = total

    @property
    def var(self) -> np.ndarray:
        return self.m2 / (self.count - 1) if self.count > 1 else np.square(self.mean)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var)

    def copy(self) -> "RunningStat":
        return copy.deepcopy(self)

    def get_state(self) -> dict:
        return {"shape": list(self.shape), "count": int(self.count), "mean": self.mean.copy(),
                "m2": self.m2.copy()}

    @classmethod
    def from_state(cls, state: dict) -> "RunningStat":
        """Inverse of `get_state`.

        Raises:
          CheckpointError: arrays whose shapes disagree with the recorded shape.
        """
        stat = cls(tuple(int(d) for d in state["shape"]))
        mean = np.asarray(state["mean"], np.float64)
        m2 = np.asarray(state["m2"], np.float64)
        if mean.shape != stat.shape or m2.shape != stat.shape:
            raise errors.CheckpointError(
                f"filter statistics of shape {stat.shape} hold arrays of shapes {mean.shape} and "
                f"{m2.shape}; the checkpoint is corrupt")
        stat.count, stat.mean, stat.m2 = int(state["count"]), mean, m2
        return stat


class Filter:
    """Base class: `__call__(obs_batch, update=True)` returns the filtered batch."""

    # True for a filter that learns nothing from what it sees: synchronising it is a no-op
    stateless = False

    def __call__(self, obs_batch: Any, update: bool = True) -> Any:
        raise NotImplementedError

    def apply_changes(self, other: "Filter") -> None:
        """Merges the updates `other` saw since its last flush into this filter."""

    def sync(self, other: "Filter") -> None:
        """Takes `other`'s statistics, keeping the updates this filter saw since its flush."""

    def clear_buffer(self) -> None:
        """Forgets the updates since the last flush (they were handed to the driver)."""

    def copy(self) -> "Filter":
        return copy.deepcopy(self)

    def as_serializable(self) -> "Filter":
        return self.copy()

    def get_state(self) -> dict:
        """The filter as plain data (for checkpoints without pickle); see `filter_from_state`."""
        raise NotImplementedError

    def serving_parameters(self) -> Optional[dict]:
        """What an exported model needs to apply this filter to raw observations: None for no
        change, else {"mean", "std", "demean", "destd", "clip"} (see MeanStdFilter.__call__)."""
        return None


class NoFilter(Filter):
    """Passes observations through unchanged."""

    stateless = True

    def __call__(self, obs_batch, update=True):
        return obs_batch

    def get_state(self) -> dict:
        return {"type": "NoFilter"}


class MeanStdFilter(Filter):
    """Standardises observations: (x - mean) / (std + 1e-8), clipped to [-clip, clip].

    Args:
      shape: shape of one observation.
      demean / destd: subtract the mean / divide by the standard deviation.
      clip: bound of the filtered values (None: no clipping).
    """

    def __init__(self, shape: Tuple[int, ...], demean: bool = True, destd: bool = True,
                 clip: Optional[float] = 10.0):
        self.shape = tuple(shape)
        self.demean = demean
        self.destd = destd
        self.clip = clip
        self.running_stat = RunningStat(self.shape)
        self.delta = RunningStat(self.shape)

    def __call__(self, obs_batch, update=True):
        x = np.asarray(obs_batch, np.float64)
        if x.shape[1:] != self.shape:
            raise errors.InvalidObservationError(
                f"MeanStdFilter for observations of shape {self.shape} got a batch of shape "
                f"{x.shape}; the env's observations do not match its observation space")
        if update:
            self.running_stat.push_batch(x)
            self.delta.push_batch(x)
        if self.demean:
            x = x - self.running_stat.mean
        if self.destd:
            x = x / (self.running_stat.std + 1e-8)
        if self.clip is not None:
            x = np.clip(x, -self.clip, self.clip)
        return x.astype(np.float32)

    def apply_changes(self, other: "MeanStdFilter") -> None:
        self.running_stat.merge(other.delta)

    def sync(self, other: "MeanStdFilter") -> None:
        self.running_stat = other.running_stat.copy()
        self.running_stat.merge(self.delta)

    def clear_buffer(self) -> None:
        self.delta = RunningStat(self.shape)

    def get_state(self) -> dict:
        return {"type": "MeanStdFilter", "shape": list(self.shape), "demean": self.demean,
                "destd": self.destd, "clip": self.clip,
                "running_stat": self.running_stat.get_state(), "delta": self.delta.get_state()}

    def serving_parameters(self) -> Optional[dict]:
        return {"mean": self.running_stat.mean.copy(), "std": self.running_stat.std.copy(),
                "demean": self.demean, "destd": self.destd, "clip": self.clip}

    def __repr__(self):
        return (f"MeanStdFilter(shape={self.shape}, count={self.running_stat.count}, "
                f"mean={self.running_stat.mean}, std={self.running_stat.std})")


FILTER_NAMES = ("NoFilter", "MeanStdFilter")


def make_filter(name: str, observation_space: Any) -> Filter:
    """Builds the filter called `name` for observations of `observation_space`.

    Raises:
      InvalidConfigError: an unknown filter name.
      UnsupportedSpaceError: MeanStdFilter asked for a non-Box observation space.
    """
    if name in (None, "NoFilter"):
        return NoFilter()
    if name == "MeanStdFilter":
        import gymnasium

        if not isinstance(observation_space, gymnasium.spaces.Box):
            raise errors.UnsupportedSpaceError(
                f"observation_filter='MeanStdFilter' needs a Box observation space, got "
                f"{observation_space}; use observation_filter='NoFilter'")
        return MeanStdFilter(observation_space.shape)
    raise errors.InvalidConfigError(
        f"unknown observation_filter {name!r}; use one of {FILTER_NAMES}")


def filter_from_state(state: dict) -> Filter:
    """Rebuilds a filter from `Filter.get_state()`.

    Raises:
      CheckpointError: an unknown filter type or malformed statistics.
    """
    try:
        kind = state["type"]
        if kind == "NoFilter":
            return NoFilter()
        if kind == "MeanStdFilter":
            f = MeanStdFilter(tuple(int(d) for d in state["shape"]), demean=bool(state["demean"]),
                              destd=bool(state["destd"]), clip=state["clip"])
            f.running_stat = RunningStat.from_state(state["running_stat"])
            f.delta = RunningStat.from_state(state["delta"])
            if f.running_stat.shape != f.shape or f.delta.shape != f.shape:
                raise errors.CheckpointError(
                    f"MeanStdFilter of shape {f.shape} holds statistics of another shape; the "
                    "checkpoint is corrupt")
            return f
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.CheckpointError(f"malformed filter state in a checkpoint: {exc!r}") from exc
    raise errors.CheckpointError(
        f"unknown filter type {state.get('type')!r} in a checkpoint; known: {FILTER_NAMES}")


def synchronize_filters(local_filters: Dict[str, Filter], remote_workers: Iterable[Any],
                        update_remote: bool = True) -> None:
    """Merges every remote worker's filter updates into `local_filters` and broadcasts them.

    `remote_workers` are RolloutWorker actor handles. Each is asked for its filters with
    `flush_after=True`; their updates are merged into the local filters, which are then sent to
    every worker with one object-store copy.
    """
    import ray

    remote_workers = list(remote_workers)
    if not remote_workers:
        return
    remote_filters = ray.get([w.get_filters.remote(flush_after=True) for w in remote_workers])
    for filters in remote_filters:
        for policy_id, remote_filter in filters.items():
            local_filters[policy_id].apply_changes(remote_filter)
    if update_remote:
        ref = ray.put({pid: f.as_serializable() for pid, f in local_filters.items()})
        ray.get([w.sync_filters.remote(ref) for w in remote_workers])
