"""Writes each training result to TensorBoard (and to result.json lines) under one experiment dir.

The trainer calls `TensorBoardLogger.log(result)` after every `train()`. Every numeric entry of the
(nested) result dict becomes a scalar tagged by its path ("info/learner/default_policy/policy_loss"),
with env steps (`timesteps_total`) on the x-axis; lists under `hist_stats` become histograms (the
distribution of episode returns of the iteration).

The events are TensorFlow 2's own summaries (the same protos `tf.summary.scalar` and
`tf.summary.histogram` write), built and written by the TensorBoard package that ships with
TensorFlow, in plain Python: through TensorFlow's summary ops they were eager ops and a
histogram function traced anew at every call, half of the driver's time on `cartpole-ppo`.
"""
from __future__ import annotations

import json
import numbers
import os
import time
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
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.logdir = os.path.abspath(logdir)
        os.makedirs(self.logdir, exist_ok=True)
        self._writer = EventFileWriter(self.logdir)
        self._json = open(os.path.join(self.logdir, "result.json"), "a", encoding="utf-8")

    def log(self, result: Mapping[str, Any]) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.histogram.summary_v2 import histogram_pb
        from tensorboard.plugins.scalar.summary_v2 import scalar_pb

        step = int(result.get("timesteps_total", result.get("training_iteration", 0)))
        summary = summary_pb2.Summary()
        for tag, value in flatten_result(result):
            summary.value.extend(scalar_pb(tag, np.float32(value)).value)
        for name, values in (result.get("hist_stats") or {}).items():
            if len(values):
                summary.value.extend(
                    histogram_pb(f"hist_stats/{name}", np.asarray(values, dtype=np.float64)).value)
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()
        record: Dict[str, Any] = {k: v for k, v in result.items() if k != "config"}
        self._json.write(json.dumps(record, default=_json_default) + "\n")
        self._json.flush()

    def close(self) -> None:
        self._writer.close()
        self._json.close()
