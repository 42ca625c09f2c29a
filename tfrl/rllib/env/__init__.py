"""Classic `ray.rllib.env`: the environment interfaces tfrl samples from."""
from tfrl.utils.lazy_exports import lazy_exports

_getattr = lazy_exports(__name__, {
    "MultiAgentEnv": "tfrl.env.multi_agent_env", "EnvContext": "tfrl.env.registry"})

# Classic env interfaces tfrl does not sample from: the rollout workers step gymnasium envs
# (vectorised in-process by num_envs_per_worker) and MultiAgentEnv.
_NOT_SUPPORTED = ("BaseEnv", "VectorEnv", "ExternalEnv", "ExternalMultiAgentEnv", "PolicyClient",
                  "PolicyServerInput")


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise ImportError(
            f"tfrl.rllib.env.{name}: tfrl's rollout workers step gymnasium envs (batched in "
            "one process with num_envs_per_worker) and MultiAgentEnv, not classic RLlib's "
            f"{name}; wrap the environment as a gymnasium.Env or a MultiAgentEnv instead "
            "(README, 'Coming from RLlib')", name=f"{__name__}.{name}")
    return _getattr(name)


__all__ = ["MultiAgentEnv", "EnvContext"]
