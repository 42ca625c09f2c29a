"""Classic `ray.rllib.agents.ppo.ppo_torch_policy` as classic RLlib has it without torch installed:
`PPOTorchPolicy` imports and derives; constructing it raises an ImportError naming PPOTFPolicy
(`tfrl.policy.torch_stand_in`). The module's mixins and loss functions import too (classic
scripts import them beside the TF ones to pick by a `--torch` flag): the mixins are inert, as
torch policies are never built, and the functions raise FrameworkNotAvailableError."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in
from tfrl.rllib.utils.framework import _TorchModuleStandIn

PPOTorchPolicy = torch_policy_stand_in("PPOTorchPolicy", "PPOTFPolicy")


class KLCoeffMixin:
    """Classic torch KLCoeffMixin (inert: torch policies are never built)."""

    def __init__(self, *args, **kwargs):
        pass


class ValueNetworkMixin:
    """Classic torch ValueNetworkMixin (inert: torch policies are never built)."""

    def __init__(self, *args, **kwargs):
        pass


def _torch_only(name: str):
    def refuse(*args, **kwargs):
        """Raises FrameworkNotAvailableError: a torch PPO function; tfrl runs TensorFlow only
        (use the one of `agents.ppo.ppo_tf_policy`)."""
        _TorchModuleStandIn()

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


ppo_surrogate_loss = _torch_only("ppo_surrogate_loss")
kl_and_loss_stats = _torch_only("kl_and_loss_stats")
vf_preds_fetches = _torch_only("vf_preds_fetches")
setup_mixins = _torch_only("setup_mixins")

__all__ = ["PPOTorchPolicy", "KLCoeffMixin", "ValueNetworkMixin", "ppo_surrogate_loss",
           "kl_and_loss_stats", "vf_preds_fetches", "setup_mixins"]
