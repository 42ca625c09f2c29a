"""Rollouts: rollout workers (local or Ray actors), WorkerSet, filters, callbacks,
episode metrics and writing rollouts straight into a replay table."""
from tfrl.rollout.callbacks import DefaultCallbacks, MultiCallbacks
from tfrl.rollout.episode import Episode
from tfrl.rollout.filters import MeanStdFilter, NoFilter, RunningStat, make_filter
from tfrl.rollout.metrics import RolloutMetrics, collect_episodes, summarize_episodes
from tfrl.rollout.replay_output import (ReplayOutput, ReplayOutputSpec, fragment_signature,
                                           replay_columns, replay_signature)
from tfrl.rollout.rollout_worker import RolloutWorker, SampleSummary
from tfrl.rollout.worker_set import WorkerSet, is_worker_failure

__all__ = [
    "DefaultCallbacks", "MultiCallbacks", "Episode", "MeanStdFilter", "NoFilter", "RunningStat",
    "make_filter", "RolloutMetrics", "collect_episodes", "summarize_episodes", "ReplayOutput",
    "ReplayOutputSpec", "fragment_signature", "replay_columns", "replay_signature",
    "RolloutWorker", "SampleSummary", "WorkerSet", "is_worker_failure",
]
