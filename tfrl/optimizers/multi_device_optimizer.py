"""LocalMultiDeviceOptimizer: the sync-samples data path, learning on every local device.

The paper's local multi-GPU strategy: the train batch read from the replay table is split once
across the devices of a `MirroredStrategy` (all local GPUs, else all logical CPU devices) and
stays there for all `num_sgd_iter` passes; each minibatch step all-reduces the replicas'
gradients. The learner policy is built inside the strategy's scope and replaces the local
worker's policy, so checkpoints, exports and weight broadcasts all read the learner's variables.
"""
from __future__ import annotations

from typing import Optional

from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer


class LocalMultiDeviceOptimizer(SyncSamplesOptimizer):
    """Config keys: those of SyncSamplesOptimizer, plus LearnerSettings' num_learner_devices."""

    def __init__(self, workers, config: Optional[dict] = None, replay=None, strategy=None,
                 **settings):
        from tfrl.learner.strategy import learner_strategy
        from tfrl.optimizers.policy_optimizer import optimizer_config
        from tfrl.optimizers.settings import LearnerSettings

        config = optimizer_config(workers, config, settings)
        if strategy is None:
            strategy = learner_strategy(LearnerSettings.from_config(config).num_learner_devices)
        super().__init__(workers, config, replay, strategy=strategy)
