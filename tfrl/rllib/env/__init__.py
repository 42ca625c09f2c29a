"""Classic `ray.rllib.env`: the environment interfaces tfrl samples from."""
from tfrl.utils.lazy_exports import lazy_exports

_getattr = lazy_exports(__name__, {
    "MultiAgentEnv": "tfrl.env.multi_agent_env", "EnvContext": "tfrl.env.registry",
    "ExternalEnv": "tfrl.env.external_env",
    "ExternalMultiAgentEnv": "tfrl.env.external_multi_agent_env",
    "PolicyClient": "tfrl.serving.policy_client"})

# Classic env interfaces tfrl does not sample from: the rollout workers step gymnasium envs
# (vectorised in-process by num_envs_per_worker), MultiAgentEnv and the external envs.
_NOT_SUPPORTED = ("BaseEnv", "VectorEnv")


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise ImportError(
            f"tfrl.rllib.env.{name}: tfrl's rollout workers step gymnasium envs (batched in "
            "one process with num_envs_per_worker) and MultiAgentEnv, not classic RLlib's "
            f"{name}; wrap the environment as a gymnasium.Env or a MultiAgentEnv instead "
            "(README, 'Coming from RLlib')", name=f"{__name__}.{name}")
    if name == "PolicyServerInput":
        raise ImportError(
            "tfrl.rllib.env.PolicyServerInput: tfrl serves a policy as an external env instead "
            "of an input reader; use tfrl.serving.PolicyServer as the trainer's env (or "
            "tfrl.serving.PolicyServerPerWorker for a server on every rollout worker) and "
            "tfrl.rllib.env.PolicyClient in the application (README, 'Train and serve inside an "
            "application')",
            name=f"{__name__}.{name}")
    return _getattr(name)


__all__ = ["MultiAgentEnv", "EnvContext", "ExternalEnv", "ExternalMultiAgentEnv", "PolicyClient"]
