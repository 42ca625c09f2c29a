"""Policy evaluation: rollout workers (local or Ray actors), WorkerSet, filters, callbacks,
episode metrics and writing rollouts straight into a replay table."""
from tfrl.evaluation.callbacks import DefaultCallbacks, MultiCallbacks
from tfrl.evaluation.episode import Episode
from tfrl.evaluation.filters import MeanStdFilter, NoFilter, RunningStat, make_filter
from tfrl.evaluation.metrics import RolloutMetrics, collect_episodes, summarize_episodes
from tfrl.evaluation.replay_output import (ReplayOutput, ReplayOutputSpec, replay_columns,
                                           replay_signature)
from tfrl.evaluation.rollout_worker import RolloutWorker, SampleSummary
from tfrl.evaluation.worker_set import WorkerSet, is_worker_failure

__all__ = [
    "DefaultCallbacks", "MultiCallbacks", "Episode", "MeanStdFilter", "NoFilter", "RunningStat",
    "make_filter", "RolloutMetrics", "collect_episodes", "summarize_episodes", "ReplayOutput",
    "ReplayOutputSpec", "replay_columns", "replay_signature", "RolloutWorker", "SampleSummary",
    "WorkerSet", "is_worker_failure",
]
