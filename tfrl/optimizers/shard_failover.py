"""Replay shard fail-over of Ape-X's optimizer: noticing a lost shard and going on without it.

A lost shard (its process or node died) is noticed when the learner or a writer fails, or by a
check every `replay_shard_check_interval_s`: the learner stops, and the shard is either dropped
(writers and the learner go on with the remaining shards) or, with
`replay_shard_checkpoint_dir`, restarted from its latest checkpoint (the shards checkpoint every
`replay_shard_checkpoint_interval_s`); then the learner restarts and the workers get the new
shard addresses.
"""
from __future__ import annotations

import logging
import time
from typing import List

from replay import errors as replay_errors
from tfrl import errors

logger = logging.getLogger(__name__)


def lost_replay_write(error: BaseException) -> bool:
    """True when a worker's sample failed because a replay server stopped answering."""
    lost = (replay_errors.UnavailableError, replay_errors.DeadlineExceededError)
    return isinstance(error, lost) or isinstance(getattr(error, "cause", None), lost)


class ShardFailOver:
    """The fail-over steps of AsyncReplayOptimizer (module docstring), a base of it.

    They use the optimizer's `settings`, `workers`, `shards` (ReplayShards), `live_shards`,
    counters (`num_shard_failures`, `num_shard_restarts`), learner state (`_learner_error`,
    `_shard_suspect` and the check times) and its learner steps (`_stop_learner`,
    `_open_datasets`, `_start_learner`, `_output_spec`, `_raise_learner_error`).
    """

    def _watch_shards(self) -> None:
        """Checks the shards when something failed (the learner, a worker) or the check interval
        passed, fails over from lost ones, checkpoints the shards when due, and raises a learner
        error that a lost shard does not explain."""
        settings, now = self.settings, time.monotonic()
        failures = self.workers.num_worker_failures
        if (self._learner_error is not None or failures != self._known_worker_failures
                or self._shard_suspect
                or now - self._last_shard_check >= settings.replay_shard_check_interval_s):
            self._known_worker_failures = failures
            self._last_shard_check = now
            self._shard_suspect = False
            lost = [i for i in self.live_shards if not self.shards.alive(i)]
            if lost:
                self._fail_over(lost)
        if (self.shards.restartable and now - self._last_shard_checkpoint
                >= settings.replay_shard_checkpoint_interval_s):
            with self.timer("checkpoint_shards"):
                self.shards.checkpoint(self.live_shards)
            self._last_shard_checkpoint = time.monotonic()
        self._raise_learner_error()

    def _fail_over(self, lost: List[int]) -> None:
        """Stops the learner, restarts each lost shard from its checkpoint (or drops it), then
        restarts the learner on the live shards and points the workers at them.

        Raises:
          TfrlError: every shard is lost.
        """
        logger.warning("replay shard(s) %s (%s) stopped answering; %s", lost,
                       [self.shards.addresses[i] for i in lost],
                       "restarting them from their checkpoints" if self.shards.restartable
                       else "going on with the others")
        self._stop_learner()
        for index in lost:
            self.num_shard_failures += 1
            if self.shards.restartable:
                try:
                    self.shards.restart(index)
                    self.num_shard_restarts += 1
                    continue
                except Exception as exc:  # noqa: BLE001 - dropped instead, and said so
                    logger.warning("replay shard %d could not be restarted (%s: %s); dropping it",
                                   index, type(exc).__name__, exc)
            self.live_shards.remove(index)
        if not self.live_shards:
            raise errors.TfrlError(
                f"every replay shard is lost (the last: {lost}); Ape-X cannot go on. Set "
                "replay_shard_checkpoint_dir to restart lost shards from their checkpoints, or "
                "restore the trainer from a checkpoint")
        self._learner_error = None
        self._open_datasets()
        # the learner first: writers held back by a rate limiter wait for it
        self._start_learner()
        self.workers.set_replay_output(self._output_spec())
        logger.warning("Ape-X goes on with replay shards %s at %s", self.live_shards,
                       [self.shards.addresses[i] for i in self.live_shards])
