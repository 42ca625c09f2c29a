"""Classic `ray.rllib.policy.torch_policy_template` without torch: build_torch_policy returns a
named class that imports, derives with with_updates and refuses construction
(tfrl/policy/torch_stand_in.py)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in


def build_torch_policy(name: str, **_hooks) -> type:
    """A stand-in torch policy class `name`; its construction raises
    FrameworkNotAvailableError (use build_tf_policy with the same hooks)."""
    return torch_policy_stand_in(name, "a policy built with build_tf_policy")


__all__ = ["build_torch_policy"]
