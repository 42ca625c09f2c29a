"""Rollouts: rollout workers (local or Ray actors), WorkerSet, filters, callbacks,
episode metrics and writing rollouts straight into a replay table.

The names below are imported on first use (PEP 562), so a process that needs only the
observation filters (ES/ARS workers, tfrl/agents/es) does not start TensorFlow.
"""
from tfrl.utils.lazy_exports import lazy_package

_NAMES_BY_MODULE = {
    "callbacks": ("DefaultCallbacks", "MultiCallbacks"),
    "episode": ("Episode",),
    "filters": ("MeanStdFilter", "NoFilter", "RunningStat", "make_filter"),
    "metrics": ("RolloutMetrics", "collect_episodes", "summarize_episodes"),
    "replay_output": ("ReplayOutput", "ReplayOutputSpec", "fragment_signature", "replay_columns", "replay_signature"),
    "rollout_worker": ("RolloutWorker", "SampleSummary"),
    "worker_set": ("WorkerSet", "is_worker_failure"),
}
__all__, __getattr__ = lazy_package(__name__, _NAMES_BY_MODULE)
