"""Classic `ray.rllib.agents.callbacks` (Ray 0.8.5 to 1.x): DefaultCallbacks and MultiCallbacks,
tfrl's rollout callbacks (tfrl/rollout/callbacks.py)."""
from tfrl.rollout.callbacks import DefaultCallbacks, MultiCallbacks

__all__ = ["DefaultCallbacks", "MultiCallbacks"]
