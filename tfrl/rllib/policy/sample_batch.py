"""Classic `ray.rllib.policy.sample_batch`."""
from tfrl.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

__all__ = ["SampleBatch", "MultiAgentBatch", "DEFAULT_POLICY_ID"]
