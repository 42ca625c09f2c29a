"""Classic `ray.rllib.execution.concurrency_ops` (`tfrl.execution.concurrency_ops`)."""
from tfrl.execution.concurrency_ops import Concurrently, Dequeue, Enqueue

__all__ = ["Concurrently", "Enqueue", "Dequeue"]
