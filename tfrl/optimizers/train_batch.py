"""How the synchronous optimizers' sampling rounds fill one train batch.

One sampling round of SyncSamplesOptimizer (and its multi-device variant) is a fragment from
every env of every sampling worker; the on-policy trainers (PG, A2C, PPO) call
`fit_fragments_to_train_batch` from their `validate_config` so that whole rounds make exactly one
train batch.
"""
from __future__ import annotations

import logging

from tfrl.errors import InvalidConfigError
from tfrl.offline.settings import OfflineSettings
from tfrl.optimizers.settings import SyncSamplesSettings
from tfrl.rollout.settings import WorkerSettings

logger = logging.getLogger(__name__)


def fit_fragments_to_train_batch(config: dict, algorithm: str) -> None:
    """Makes one sampling round fill a train batch exactly (edits `config` in place).

    One round yields max(num_workers, 1) * num_envs_per_worker * rollout_fragment_length steps.
    If that is more than train_batch_size the fragment is shortened; then train_batch_size must
    be a multiple of the round. Episodes of random length make this moot in batch_mode
    "complete_episodes", which is not checked. Also fills sgd_minibatch_size None with
    train_batch_size.

    Raises:
        InvalidConfigError: an ill-typed or out-of-range batch or rollout setting (see
            SyncSamplesSettings and WorkerSettings), a minibatch larger than the train batch,
            or a train batch that is not a multiple of one sampling round.
    """
    batch_settings = SyncSamplesSettings.from_config(config)  # types and ranges checked here
    rounds = WorkerSettings.from_config(config)
    train_batch = batch_settings.train_batch_size
    minibatch = batch_settings.minibatch_size
    config["sgd_minibatch_size"] = minibatch
    if minibatch > train_batch:
        raise InvalidConfigError(
            f"{algorithm}: sgd_minibatch_size ({minibatch}) must be between 1 and "
            f"train_batch_size ({train_batch}); lower sgd_minibatch_size or raise "
            "train_batch_size.")
    if rounds.complete_episodes or OfflineSettings.from_config(config).reads_files:
        return  # whole episodes or recorded batches: rounds of no fixed size
    envs = max(int(config["num_workers"]), 1) * rounds.num_envs_per_worker
    fragment = rounds.rollout_fragment_length
    if envs * fragment > train_batch:
        shorter = max(train_batch // envs, 1)
        logger.info("%s: rollout_fragment_length %d -> %d so that one sampling round of %d envs "
                    "fits train_batch_size %d", algorithm, fragment, shorter, envs, train_batch)
        config["rollout_fragment_length"] = fragment = shorter
    round_steps = envs * fragment
    if train_batch % round_steps:
        raise InvalidConfigError(
            f"{algorithm}: train_batch_size {train_batch} is not a multiple of one sampling "
            f"round ({envs} envs x rollout_fragment_length {fragment} = {round_steps} "
            f"steps); use train_batch_size {(train_batch // round_steps + 1) * round_steps} or "
            "change num_workers, num_envs_per_worker or rollout_fragment_length.")
