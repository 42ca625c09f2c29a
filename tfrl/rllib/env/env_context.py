"""Classic `ray.rllib.env.env_context`."""
from tfrl.env.registry import EnvContext

__all__ = ["EnvContext"]
