"""Writes each training result to TensorBoard (and to result.json lines) under one experiment dir.

The trainer calls `TensorBoardLogger.log(result)` after every `train()`. Every numeric entry of the
(nested) result dict becomes a scalar tagged by its path ("info/learner/default_policy/policy_loss"),
with env steps (`timesteps_total`) on the x-axis; lists under `hist_stats` become histograms (the
distribution of episode returns of the iteration).
"""
from __future__ import annotations

import json
import numbers
import os
from typing import Any, Dict, Iterator, Mapping, Tuple

import numpy as np

# Top-level entries that are not scalar curves (hist_stats become histograms below).
_SKIPPED_KEYS = frozenset({"config", "hist_stats"})


def flatten_result(result: Mapping[str, Any], prefix: str = "") -> Iterator[Tuple[str, float]]:
    """Yields (tag, value) for every finite-or-not numeric leaf of a nested result dict."""
    for key, value in result.items():
        tag = f"{prefix}{key}"
        if key in _SKIPPED_KEYS and not prefix:
            continue
        if isinstance(value, Mapping):
            yield from flatten_result(value, prefix=f"{tag}/")
        elif isinstance(value, (bool, np.bool_)):
            yield tag, float(value)
        elif isinstance(value, (numbers.Number, np.number)) and np.ndim(value) == 0:
            yield tag, float(value)


def _json_default(value: Any):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


class TensorBoardLogger:
    """Summary writer for one experiment: `<logdir>/<experiment>/` holds events and result.json."""

    def __init__(self, logdir: str):
        import tensorflow as tf

        self._tf = tf
        self.logdir = os.path.abspath(logdir)
        os.makedirs(self.logdir, exist_ok=True)
        self._writer = tf.summary.create_file_writer(self.logdir)
        self._json = open(os.path.join(self.logdir, "result.json"), "a", encoding="utf-8")

    def log(self, result: Mapping[str, Any]) -> None:
        step = int(result.get("timesteps_total", result.get("training_iteration", 0)))
        tf = self._tf
        with self._writer.as_default(step=step):
            for tag, value in flatten_result(result):
                tf.summary.scalar(tag, value)
            for name, values in (result.get("hist_stats") or {}).items():
                if len(values):
                    tf.summary.histogram(f"hist_stats/{name}", np.asarray(values, dtype=np.float64))
        self._writer.flush()
        record: Dict[str, Any] = {k: v for k, v in result.items() if k != "config"}
        self._json.write(json.dumps(record, default=_json_default) + "\n")
        self._json.flush()

    def close(self) -> None:
        self._writer.close()
        self._json.close()
