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
from tfrl.optimizers.adaptive_optimizer import AdaptiveOptimizer
from tfrl.optimizers.settings import LearnerSettings, OptimizerChoiceSettings
from tfrl.optimizers.strategies import build_strategy

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
    candidates = _one_device_candidates(tuple(auto_candidates or allowed), allowed, config)
    return AdaptiveOptimizer(workers, config, replay, allowed=allowed,
                             default_candidates=candidates, algorithm=algorithm)


def _one_device_candidates(candidates: tuple, allowed: Sequence[str], config: dict) -> tuple:
    """`candidates` with multi_device replaced by sync_samples when the learner would have one
    device: the same learning plus a one-replica MirroredStrategy's overhead (about half of
    sync_samples' rate for PPO on CartPole in tools/bench_optimizers.py), and only one of the two
    can be a candidate (they share the replay tables)."""
    import tensorflow as tf

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
