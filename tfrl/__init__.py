"""tfrl: a TensorFlow 2 reinforcement-learning toolkit.

Policies (`tfrl.policy`, built with `build_tf_policy`) and models (`tfrl.models`) hold the
numerics; rollout workers on Ray (`tfrl.evaluation`) produce experience into a replay service
(the `replay` package); policy optimizers (`tfrl.optimizers`) own the distributed execution;
trainers (`tfrl.trainer`, `build_trainer`, `tfrl.agents`) drive it all.
"""
from tfrl import errors
from tfrl.models import ModelCatalog, TFModel
from tfrl.policy import (DEFAULT_POLICY_ID, ComputeTDErrorMixin, EntropyCoeffSchedule,
                         KLCoeffMixin, LearningRateSchedule, MultiAgentBatch, Policy, SampleBatch,
                         TargetNetworkMixin, TFPolicy, ValueNetworkMixin, adjust_nstep,
                         build_tf_policy, compute_advantages, compute_gae_for_sample_batch,
                         concat_samples)
from tfrl.utils import LinearSchedule, PiecewiseSchedule
from tfrl.env import MultiAgentEnv, register_env
from tfrl.evaluation import (DefaultCallbacks, ReplayOutputSpec, RolloutWorker, WorkerSet,
                             collect_episodes, replay_signature, summarize_episodes)

__all__ = [
    "errors", "ModelCatalog", "TFModel", "DEFAULT_POLICY_ID", "ComputeTDErrorMixin",
    "EntropyCoeffSchedule", "KLCoeffMixin", "LearningRateSchedule", "MultiAgentBatch", "Policy",
    "SampleBatch", "TargetNetworkMixin", "TFPolicy", "ValueNetworkMixin", "adjust_nstep",
    "build_tf_policy", "compute_advantages", "compute_gae_for_sample_batch", "concat_samples",
    "LinearSchedule", "PiecewiseSchedule", "MultiAgentEnv", "register_env", "DefaultCallbacks",
    "ReplayOutputSpec", "RolloutWorker", "WorkerSet", "collect_episodes", "replay_signature",
    "summarize_episodes",
]
