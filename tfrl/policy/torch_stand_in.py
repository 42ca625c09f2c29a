"""Stand-ins for classic RLlib's torch policy classes (`DQNTorchPolicy`, `PPOTorchPolicy`, ...).

Classic RLlib defines its torch policies even when torch is not installed: modules import them
(`from ray.rllib.agents.ppo import PPOTorchPolicy`), pick one by a `--torch` flag and derive
variants with `with_updates` at import time; only constructing one fails, with an ImportError.
tfrl runs TensorFlow only, so its classic paths offer the same: a named class per torch policy
that imports, derives, and refuses construction with `FrameworkNotAvailableError` (an
ImportError) naming the TensorFlow policy to use instead."""
from __future__ import annotations

from tfrl.errors import FrameworkNotAvailableError
from tfrl.policy.policy import Policy


class TorchPolicyStandIn(Policy):
    """A classic torch policy class that tfrl cannot construct (module docstring)."""

    framework = "torch"
    preprocesses_observations = True  # never built: the worker leaves its spaces as they are
    tf_counterpart = "its TensorFlow policy"

    def __init__(self, *args, **kwargs):
        """Raises:
          FrameworkNotAvailableError: always; tfrl has no torch policies.
        """
        raise FrameworkNotAvailableError(
            f"{type(self).__name__} is a torch policy and tfrl runs TensorFlow only; use "
            f"{self.tf_counterpart} (framework 'tf' or 'tf2')")

    @classmethod
    def with_updates(cls, **overrides) -> type:
        """A stand-in named `name` (default: this one's name) that refuses construction alike;
        the other overrides are accepted and unused, as nothing is built."""
        return torch_policy_stand_in(overrides.get("name", cls.__name__), cls.tf_counterpart)


def torch_policy_stand_in(name: str, tf_counterpart: str) -> type:
    """The stand-in class `name` for a classic torch policy whose TensorFlow counterpart is
    `tf_counterpart` (named in the error its construction raises)."""
    return type(name, (TorchPolicyStandIn,), {
        "tf_counterpart": tf_counterpart, "__module__": __name__,
        "__doc__": f"Classic RLlib's {name}: refuses construction; use {tf_counterpart}."})
