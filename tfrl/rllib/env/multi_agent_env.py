"""Classic `ray.rllib.env.multi_agent_env` (and its ENV_STATE key, the agent id classic
multi-agent envs put the global state under)."""
from tfrl.env.multi_agent_env import MultiAgentEnv, make_multi_agent

ENV_STATE = "state"

__all__ = ["MultiAgentEnv", "make_multi_agent", "ENV_STATE"]
