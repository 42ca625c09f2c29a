"""Classic `ray.rllib.env`: the environment interfaces tfrl samples from."""
from tfrl.utils.lazy_exports import lazy_exports

_getattr = lazy_exports(__name__, {
    "MultiAgentEnv": "tfrl.env.multi_agent_env", "EnvContext": "tfrl.env.registry",
    "ExternalEnv": "tfrl.env.external_env",
    "ExternalMultiAgentEnv": "tfrl.env.external_multi_agent_env",
    "PolicyClient": "tfrl.serving.policy_client",
    "BaseEnv": "tfrl.env.base_env", "VectorEnv": "tfrl.env.vector_env",
    "PettingZooEnv": "tfrl.env.pettingzoo_env",
    "ParallelPettingZooEnv": "tfrl.env.pettingzoo_env"})


def __getattr__(name):
    if name == "PolicyServerInput":
        raise ImportError(
            "tfrl.rllib.env.PolicyServerInput: tfrl serves a policy as an external env instead "
            "of an input reader; use tfrl.serving.PolicyServer as the trainer's env (or "
            "tfrl.serving.PolicyServerPerWorker for a server on every rollout worker) and "
            "tfrl.rllib.env.PolicyClient in the application (README, 'Train and serve inside an "
            "application')",
            name=f"{__name__}.{name}")
    return _getattr(name)


__all__ = ["MultiAgentEnv", "EnvContext", "ExternalEnv", "ExternalMultiAgentEnv", "PolicyClient",
           "BaseEnv", "VectorEnv", "PettingZooEnv", "ParallelPettingZooEnv"]
