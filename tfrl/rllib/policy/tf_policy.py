"""Classic `ray.rllib.policy.tf_policy`: TFPolicy and the schedule mixins it held."""
from tfrl.policy.mixins import EntropyCoeffSchedule, LearningRateSchedule
from tfrl.policy.tf_policy import TFPolicy

__all__ = ["TFPolicy", "LearningRateSchedule", "EntropyCoeffSchedule"]
