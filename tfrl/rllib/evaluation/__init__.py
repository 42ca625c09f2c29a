"""Classic `ray.rllib.evaluation`: rollout workers, batches, postprocessing, metrics."""
from tfrl.utils.lazy_exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "RolloutWorker": "tfrl.rollout.rollout_worker", "WorkerSet": "tfrl.rollout.worker_set",
    "SampleBatch": "tfrl.policy.sample_batch", "MultiAgentBatch": "tfrl.policy.sample_batch",
    "compute_advantages": "tfrl.policy.postprocessing",
    "collect_metrics": "tfrl.rllib.evaluation.metrics",
    "MultiAgentEpisode": "tfrl.rollout.episode:Episode",
    "Episode": "tfrl.rollout.episode",
    "SampleBatchBuilder": "tfrl.rllib.evaluation.sample_batch_builder"})
__all__ = ["RolloutWorker", "WorkerSet", "SampleBatch", "MultiAgentBatch", "compute_advantages",
           "collect_metrics", "MultiAgentEpisode", "Episode", "SampleBatchBuilder"]
