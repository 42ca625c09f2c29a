"""MinibatchBuffer: serves each train batch to a learner several times (IMPALA's
`minibatch_buffer_size` and `num_sgd_iter`).

Sits between a learner thread (learner_thread.py) and the iterator it reads batches from. The
buffer holds up to `size` batches and hands them out in turn; each is handed out
`num_passes` times before its slot takes the next batch from the iterator. With size 1 a batch
gets `num_passes` consecutive gradient steps; with a larger size the passes of several batches
interleave, so consecutive steps see different data.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional


class MinibatchBuffer:
    """Args:
      next_batch: returns the next batch (blocks until there is one; may raise to end).
      size: batches held at once (>= 1).
      num_passes: times each batch is handed out (>= 1).
    """

    def __init__(self, next_batch: Callable[[], Any], size: int, num_passes: int):
        if size < 1 or num_passes < 1:
            raise ValueError(f"MinibatchBuffer needs size >= 1 and num_passes >= 1, got "
                             f"size={size}, num_passes={num_passes}")
        self._next_batch = next_batch
        self.num_passes = int(num_passes)
        self._slots: List[Optional[Any]] = [None] * int(size)
        self._passes_left = [0] * int(size)
        self._index = 0

    def get(self):
        """(batch, fresh): the next batch to learn on, and whether it was just read (its first
        pass). Raises whatever `next_batch` raises."""
        i = self._index
        fresh = self._passes_left[i] == 0
        if fresh:
            self._slots[i] = None  # drop the old batch before reading the next one
            self._slots[i] = self._next_batch()
            self._passes_left[i] = self.num_passes
        self._passes_left[i] -= 1
        self._index = (i + 1) % len(self._slots)
        return self._slots[i], fresh
