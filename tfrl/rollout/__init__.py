"""Rollouts: rollout workers (local or Ray actors), WorkerSet, filters, callbacks,
episode metrics and writing rollouts straight into a replay table.

The names below are imported on first use (PEP 562), so a process that needs only the
observation filters (ES/ARS workers, tfrl/agents/es) does not start TensorFlow.
"""
import importlib
from typing import Any

_EXPORTS = {
    "DefaultCallbacks": "callbacks", "MultiCallbacks": "callbacks", "Episode": "episode",
    "MeanStdFilter": "filters", "NoFilter": "filters", "RunningStat": "filters",
    "make_filter": "filters", "RolloutMetrics": "metrics", "collect_episodes": "metrics",
    "summarize_episodes": "metrics", "ReplayOutput": "replay_output",
    "ReplayOutputSpec": "replay_output", "fragment_signature": "replay_output",
    "replay_columns": "replay_output", "replay_signature": "replay_output",
    "RolloutWorker": "rollout_worker", "SampleSummary": "rollout_worker",
    "WorkerSet": "worker_set", "is_worker_failure": "worker_set",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
