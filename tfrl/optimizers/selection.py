"""Choosing a trainer's policy optimizer by config (`optimizer: <strategy name>`).

An algorithm declares the strategies that fit it and its default; its `make_policy_optimizer`
calls `choose_policy_optimizer`, which reads the `optimizer` key once and builds that strategy
(or, for "auto", an AdaptiveOptimizer that measures the candidates and keeps the fastest).
Classic RLlib's dict of optimizer arguments under `optimizer` keeps the algorithm's default.

Strategies:
  sync_samples     SyncSamplesOptimizer: synchronous sampling into replay, minibatch SGD
  multi_device     LocalMultiDeviceOptimizer: the same on every local device
  async_gradients  AsyncGradientsOptimizer: worker gradients applied by the driver as they come
  sharded_ps       ShardedParameterServerOptimizer: gradients pushed to parameter shards
  allreduce        AllreduceOptimizer: workers average their gradients among themselves
  auto             AdaptiveOptimizer over the others
"""
from __future__ import annotations

from typing import Optional, Sequence

from tfrl import errors
from tfrl.optimizers.settings import OptimizerChoiceSettings

STRATEGIES = ("sync_samples", "multi_device", "async_gradients", "sharded_ps", "allreduce")
# strategies that stream samples through the trainer's replay tables (one of them per trainer)
REPLAY_STRATEGIES = ("sync_samples", "multi_device")
# keys of the minibatch SGD settings that algorithms without them (A3C) get for allreduce
_ALLREDUCE_DEFAULTS = {"num_sgd_iter": 1, "sgd_minibatch_size": None, "shuffle_sequences": False}


def chosen_strategy(config: dict, allowed: Sequence[str], default: str, algorithm: str) -> str:
    """The strategy name the config asks for (`default` when it gives a dict or nothing).

    Raises:
      InvalidConfigError: `optimizer` is neither a dict nor a name, or names a strategy the
        algorithm does not allow (the message lists those it does).
    """
    choice = OptimizerChoiceSettings.from_config(config).optimizer
    if isinstance(choice, dict):
        return default
    if choice != "auto" and choice not in allowed:
        raise errors.InvalidConfigError(
            f"{algorithm}: optimizer {choice!r} is not available; choose one of "
            f"{', '.join(repr(s) for s in (*allowed, 'auto'))} (or leave the key out for "
            f"{default!r})")
    return choice


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

        defaults = {k: v for k, v in _ALLREDUCE_DEFAULTS.items() if k not in config}
        return AllreduceOptimizer(workers, config, replay, **defaults, **settings)
    raise errors.InvalidConfigError(
        f"unknown policy optimizer strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


def choose_policy_optimizer(workers, config: dict, replay, *, allowed: Sequence[str],
                            default: str, algorithm: str,
                            auto_candidates: Optional[Sequence[str]] = None):
    """The policy optimizer `config["optimizer"]` names for this algorithm: one of `allowed`,
    `default` when the key holds a dict, or "auto": an AdaptiveOptimizer measuring
    config["auto_candidates"] (None: `auto_candidates`, else `allowed`, with multi_device
    replaced by sync_samples when the learner has one device: see `_one_device_candidates`).

    Raises:
      InvalidConfigError: see `chosen_strategy`, AdaptiveOptimizer and each strategy.
    """
    name = chosen_strategy(config, allowed, default, algorithm)
    if name != "auto":
        return build_strategy(name, workers, config, replay)
    from tfrl.optimizers.adaptive_optimizer import AdaptiveOptimizer

    candidates = _one_device_candidates(tuple(auto_candidates or allowed), allowed, config)
    return AdaptiveOptimizer(workers, config, replay, allowed=allowed,
                             default_candidates=candidates, algorithm=algorithm)


def _one_device_candidates(candidates: tuple, allowed: Sequence[str], config: dict) -> tuple:
    """`candidates` with multi_device replaced by sync_samples when the learner would have one
    device: the same learning plus a one-replica MirroredStrategy's overhead (about half of
    sync_samples' rate for PPO on CartPole in tools/bench_optimizers.py), and only one of the two
    can be a candidate (they share the replay tables)."""
    import tensorflow as tf

    from tfrl.optimizers.settings import LearnerSettings

    if "multi_device" not in candidates or "sync_samples" not in allowed:
        return candidates
    devices = LearnerSettings.from_config(config).num_learner_devices
    if devices == "auto":
        devices = len(tf.config.list_logical_devices("GPU")
                      or tf.config.list_logical_devices("CPU"))
    if devices != 1:
        return candidates
    return tuple("sync_samples" if c == "multi_device" else c for c in candidates
                 if c != "sync_samples" or "multi_device" not in candidates)
