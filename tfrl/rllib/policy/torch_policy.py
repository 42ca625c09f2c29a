"""Classic `ray.rllib.policy.torch_policy` without torch: TorchPolicy and its mixins to name and
derive from; a torch policy refuses construction (tfrl/policy/torch_stand_in.py)."""
from tfrl.policy.torch_stand_in import TorchPolicyStandIn as TorchPolicy


class LearningRateSchedule:
    """Classic torch LearningRateSchedule mixin (inert: torch policies are never built)."""

    def __init__(self, *args, **kwargs):
        pass


class EntropyCoeffSchedule:
    """Classic torch EntropyCoeffSchedule mixin (inert: torch policies are never built)."""

    def __init__(self, *args, **kwargs):
        pass


__all__ = ["TorchPolicy", "LearningRateSchedule", "EntropyCoeffSchedule"]
