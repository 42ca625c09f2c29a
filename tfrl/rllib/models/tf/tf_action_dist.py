"""Classic `ray.rllib.models.tf.tf_action_dist`."""
from tfrl.models.distributions import (ActionDistribution, Categorical, Deterministic,
                                       DiagGaussian, MultiCategorical, SquashedGaussian)
from tfrl.models.multi_action_dist import MultiActionDistribution

TFActionDistribution = ActionDistribution

__all__ = ["TFActionDistribution", "Categorical", "MultiCategorical", "DiagGaussian",
           "SquashedGaussian", "Deterministic", "MultiActionDistribution"]
