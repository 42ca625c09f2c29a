"""Classic `ray.rllib.env.multi_agent_env`."""
from tfrl.env.multi_agent_env import MultiAgentEnv, make_multi_agent

__all__ = ["MultiAgentEnv", "make_multi_agent"]
