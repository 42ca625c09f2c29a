"""Classic `ray.rllib.execution.replay_buffer` (`tfrl.execution.replay_buffer`)."""
from tfrl.execution.replay_buffer import LocalReplayBuffer

__all__ = ["LocalReplayBuffer"]
