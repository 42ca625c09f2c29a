"""Classic `ray.rllib.env.pettingzoo_env`: tfrl's PettingZoo adapters (tfrl/env/pettingzoo_env.py),
`PettingZooEnv` for a turn-based AEC env and `ParallelPettingZooEnv` for a parallel one."""
from tfrl.env.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

__all__ = ["PettingZooEnv", "ParallelPettingZooEnv"]
