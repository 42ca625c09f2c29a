"""Classic `ray.rllib.execution` (Ray 0.8.5-1.x): the execution-plan operators, tfrl's
`tfrl.execution` (imported when first used)."""
from tfrl.utils.lazy_exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "Concurrently": "tfrl.execution.concurrency_ops", "Enqueue": "tfrl.execution.concurrency_ops",
    "Dequeue": "tfrl.execution.concurrency_ops",
    "StandardMetricsReporting": "tfrl.execution.metric_ops",
    "LocalReplayBuffer": "tfrl.execution.replay_buffer",
    "Replay": "tfrl.execution.replay_ops", "StoreToReplayBuffer": "tfrl.execution.replay_ops",
    "ParallelRollouts": "tfrl.execution.rollout_ops", "ConcatBatches": "tfrl.execution.rollout_ops",
    "SelectExperiences": "tfrl.execution.rollout_ops",
    "StandardizeFields": "tfrl.execution.rollout_ops",
    "TrainOneStep": "tfrl.execution.train_ops", "UpdateTargetNetwork": "tfrl.execution.train_ops"})
__all__ = ["Concurrently", "Enqueue", "Dequeue", "StandardMetricsReporting", "LocalReplayBuffer",
           "Replay", "StoreToReplayBuffer", "ParallelRollouts", "ConcatBatches",
           "SelectExperiences", "StandardizeFields", "TrainOneStep", "UpdateTargetNetwork"]
