"""Classic `ray.rllib.policy`: Policy, TFPolicy, build_tf_policy."""
from tfrl.utils.lazy_exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "Policy": "tfrl.policy.policy", "TFPolicy": "tfrl.policy.tf_policy",
    "build_tf_policy": "tfrl.policy.tf_policy_template"})
__all__ = ["Policy", "TFPolicy", "build_tf_policy"]
