"""Policies: the interface, the TF2 implementation, build_tf_policy, mixins, batches and
postprocessing."""
from tfrl.policy.mixins import (ComputeTDErrorMixin, EntropyCoeffSchedule, KLCoeffMixin,
                                LearningRateSchedule, TargetNetworkMixin, ValueNetworkMixin)
from tfrl.policy.policy import Policy
from tfrl.policy.postprocessing import (Postprocessing, adjust_nstep, compute_advantages,
                                        compute_gae_for_sample_batch, discount_cumsum)
from tfrl.policy.rnn_sequencing import (mean_over_valid_rows, pad_batch_to_sequences,
                                       sequence_mask)
from tfrl.policy.sample_batch import (DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch,
                                      concat_samples)
from tfrl.policy.tf_policy import TFPolicy
from tfrl.policy.tf_policy_template import build_tf_policy

__all__ = [
    "Policy", "TFPolicy", "build_tf_policy", "SampleBatch", "MultiAgentBatch",
    "concat_samples", "DEFAULT_POLICY_ID", "Postprocessing", "compute_advantages",
    "compute_gae_for_sample_batch", "adjust_nstep", "discount_cumsum",
    "pad_batch_to_sequences", "sequence_mask", "mean_over_valid_rows", "LearningRateSchedule",
    "EntropyCoeffSchedule", "KLCoeffMixin", "ValueNetworkMixin", "TargetNetworkMixin",
    "ComputeTDErrorMixin",
]
