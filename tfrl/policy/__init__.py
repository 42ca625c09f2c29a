"""Policies: the interface, the TF2 implementation, build_tf_policy, mixins, batches,
postprocessing, and the numpy stand-in of remote rollout workers (numpy_policy.py).

The names below are imported on first use (PEP 562), so a rollout worker that acts in numpy
(`NumpyPolicy`) imports batches and postprocessing without starting TensorFlow.
"""
from tfrl.utils.lazy_exports import lazy_package

_NAMES_BY_MODULE = {
    "mixins": ("ComputeTDErrorMixin", "EntropyCoeffSchedule", "KLCoeffMixin",
               "LearningRateSchedule", "TargetNetworkMixin", "ValueNetworkMixin"),
    "numpy_policy": ("NumpyPolicy", "NumpyPolicySpec"),
    "policy": ("Policy",),
    "postprocessing": ("Postprocessing", "adjust_nstep", "compute_advantages",
                       "compute_gae_for_sample_batch", "discount_cumsum"),
    "rnn_sequencing": ("mean_over_valid_rows", "pad_batch_to_sequences", "sequence_mask"),
    "sample_batch": ("DEFAULT_POLICY_ID", "MultiAgentBatch", "SampleBatch", "concat_samples"),
    "tf_policy": ("TFPolicy",),
    "tf_policy_template": ("build_tf_policy",),
}
__all__, __getattr__ = lazy_package(__name__, _NAMES_BY_MODULE)
