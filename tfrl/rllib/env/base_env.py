"""Classic `ray.rllib.env.base_env`: tfrl's BaseEnv (tfrl/env/base_env.py), which rollout workers
sample by polling, with `to_base_env`, `ASYNC_RESET_RETURN` and the single-agent id
`_DUMMY_AGENT_ID`."""
from tfrl.env.base_env import _DUMMY_AGENT_ID, ASYNC_RESET_RETURN, BaseEnv
from tfrl.env.vector_env import VectorEnv

__all__ = ["BaseEnv", "VectorEnv", "ASYNC_RESET_RETURN", "_DUMMY_AGENT_ID"]
