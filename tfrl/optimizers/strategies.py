"""The policy optimizer strategies by name: what `optimizer: <name>` builds (selection.py
chooses the name, AdaptiveOptimizer measures several of them).
"""
from __future__ import annotations

from tfrl import errors

STRATEGIES = ("sync_samples", "multi_device", "async_gradients", "sharded_ps", "allreduce")
# strategies that stream samples through the trainer's replay tables (one of them per trainer)
REPLAY_STRATEGIES = ("sync_samples", "multi_device")


def build_strategy(name: str, workers, config: dict, replay, **settings):
    """The policy optimizer of strategy `name` (one of STRATEGIES).

    Raises:
      InvalidConfigError: an unknown name, or what the strategy's constructor raises.
    """
    if name == "sync_samples":
        from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer

        return SyncSamplesOptimizer(workers, config, replay, **settings)
    if name == "multi_device":
        from tfrl.optimizers.multi_device_optimizer import LocalMultiDeviceOptimizer

        return LocalMultiDeviceOptimizer(workers, config, replay, **settings)
    if name == "async_gradients":
        from tfrl.optimizers.async_gradients_optimizer import AsyncGradientsOptimizer

        return AsyncGradientsOptimizer(workers, config, replay, **settings)
    if name == "sharded_ps":
        from tfrl.optimizers.sharded_ps_optimizer import ShardedParameterServerOptimizer

        return ShardedParameterServerOptimizer(workers, config, replay, **settings)
    if name == "allreduce":
        from tfrl.optimizers.allreduce_optimizer import AllreduceOptimizer

        return AllreduceOptimizer(workers, config, replay, **settings)
    raise errors.InvalidConfigError(
        f"unknown policy optimizer strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
