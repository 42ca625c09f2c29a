"""Classic `ray.rllib.env.vector_env`: VectorEnv as a name for annotations (base_env.py)."""
from tfrl.rllib.env.base_env import VectorEnv

__all__ = ["VectorEnv"]
