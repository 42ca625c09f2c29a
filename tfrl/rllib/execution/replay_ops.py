"""Classic `ray.rllib.execution.replay_ops` (`tfrl.execution.replay_ops`; local buffers only)."""
from tfrl.execution.replay_ops import Replay, StoreToReplayBuffer

__all__ = ["StoreToReplayBuffer", "Replay"]
