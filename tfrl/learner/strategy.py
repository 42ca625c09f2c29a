"""Choosing the learner's distribution strategy from the `num_learner_devices` config key."""
from __future__ import annotations

from typing import Union

import tensorflow as tf

from tfrl import errors
from tfrl.learner.mirrored_learner import mirrored_strategy


def learner_strategy(num_devices: Union[str, int] = "auto") -> tf.distribute.Strategy:
    """A MirroredStrategy over the local GPUs (or, without GPUs, the logical CPU devices).

    "auto" takes all of them; an int takes the first n. The strategy is shared by every learner
    of the process that uses the same devices.

    Raises:
      InvalidConfigError: more devices asked for than exist, or a value that is neither "auto"
        nor a positive int.
    """
    devices = [d.name for d in tf.config.list_logical_devices("GPU")] or [
        d.name for d in tf.config.list_logical_devices("CPU")]
    if num_devices != "auto":
        if not isinstance(num_devices, int) or num_devices < 1 or num_devices > len(devices):
            raise errors.InvalidConfigError(
                f"num_learner_devices={num_devices!r}: use 'auto' or an int from 1 to {len(devices)} "
                f"(the local devices are {devices})")
        devices = devices[:num_devices]
    return mirrored_strategy(devices)
