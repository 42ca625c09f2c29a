"""Classic `ray.rllib.env.vector_env`: tfrl's VectorEnv (tfrl/env/vector_env.py), whose sub-envs
rollout workers step as one batch, with `VectorEnv.wrap`."""
from tfrl.env.vector_env import VectorEnv, VectorizedGymEnv

# classic RLlib's name of what VectorEnv.wrap returns
_VectorizedGymEnv = VectorizedGymEnv

__all__ = ["VectorEnv", "_VectorizedGymEnv"]
