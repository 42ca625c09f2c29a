"""Classic `ray.rllib.policy.tf_policy_template`."""
from tfrl.policy.tf_policy_template import build_tf_policy

__all__ = ["build_tf_policy"]
