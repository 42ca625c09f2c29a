"""LearnerThread: the learner of the asynchronous optimizers, on a thread of the driver.

`AsyncSamplesOptimizer` (IMPALA, APPO) runs its learner here so the driver's loop can keep
handing out sample requests and weights while gradient steps run: the thread pulls train
batches (through a `MinibatchBuffer`, from a `ReplayDataset` iterator over the learner queue
table), calls `learn_on_batch` of a `Learner` (tfrl/learner/learner.py) on each and counts
what it trained. The driver reads `weights_version`, `num_steps_trained` and `stats`, and
`error` if the thread died.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, Optional

from tfrl.learner.minibatch_buffer import MinibatchBuffer

logger = logging.getLogger(__name__)


class LearnerThread(threading.Thread):
    """Args:
      learner: a `Learner` (e.g. `MinibatchSGD`).
      next_batch: returns the next train batch; blocks until there is one.
      steps_per_batch: env steps in one train batch (for `num_steps_trained`).
      minibatch_buffer_size, num_sgd_iter: see `MinibatchBuffer` (size, num_passes).
    """

    def __init__(self, learner, next_batch: Callable[[], Any], steps_per_batch: int,
                 minibatch_buffer_size: int = 1, num_sgd_iter: int = 1):
        super().__init__(name="tfrl-learner", daemon=True)
        self.learner = learner
        self.buffer = MinibatchBuffer(next_batch, minibatch_buffer_size, num_sgd_iter)
        self.steps_per_batch = int(steps_per_batch)
        self.lock = threading.Lock()
        self.num_steps_trained = 0
        self.num_batches_read = 0
        self.weights_version = 0  # gradient steps taken: weights change with every one
        self.stats: Dict[str, float] = {}
        self.error: Optional[BaseException] = None
        self._stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopped.is_set():
                batch, fresh = self.buffer.get()
                if self._stopped.is_set():
                    return
                stats = self.learner.learn_on_batch(batch)
                with self.lock:
                    self.num_steps_trained += self.steps_per_batch
                    self.num_batches_read += int(fresh)
                    self.weights_version += 1
                    self.stats = stats
        except BaseException as e:  # noqa: BLE001 - handed to the driver, which raises it
            if not self._stopped.is_set():
                logger.error("the learner thread failed: %r", e)
                self.error = e

    def stop(self, timeout: Optional[float] = 10.0) -> None:
        """Asks the thread to end after its current step and waits up to `timeout` seconds (a
        thread blocked on an empty queue ends when its dataset is closed)."""
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()
