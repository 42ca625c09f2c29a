"""Classic `ray.rllib.models.torch.torch_action_dist` without torch: the distribution classes to
name and derive from; construction refused (models/torch/__init__.py)."""
from tfrl.rllib.utils.framework import _TorchModuleStandIn


class TorchDistributionWrapper(_TorchModuleStandIn):
    """Classic RLlib's torch distribution base (stand-in)."""


class TorchCategorical(TorchDistributionWrapper):
    """Stand-in; use tfrl.rllib.models.tf.tf_action_dist.Categorical."""


class TorchMultiCategorical(TorchDistributionWrapper):
    """Stand-in; use tfrl.rllib.models.tf.tf_action_dist.MultiCategorical."""


class TorchDiagGaussian(TorchDistributionWrapper):
    """Stand-in; use tfrl.rllib.models.tf.tf_action_dist.DiagGaussian."""


class TorchDeterministic(TorchDistributionWrapper):
    """Stand-in; use tfrl.rllib.models.tf.tf_action_dist.Deterministic."""


__all__ = ["TorchDistributionWrapper", "TorchCategorical", "TorchMultiCategorical",
           "TorchDiagGaussian", "TorchDeterministic"]
