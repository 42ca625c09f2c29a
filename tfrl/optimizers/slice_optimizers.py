"""Numpy optimizer steps for one flat slice of weights: what a parameter shard applies.

A `ParameterShard` (sharded_ps_optimizer.py) holds one slice of the policy's flat weights and
the optimizer state of that slice, and applies every pushed gradient to it. The policy's
optimizer is a tf_keras one; this module repeats its dense update rule in numpy for the
optimizers policies use (SGD with or without momentum and Nesterov, Adam with or without
AMSGrad, RMSprop, plain, centered or with momentum), so a shard needs no TensorFlow: a
shard actor then starts in well under a second instead of spending about four seconds of CPU
importing TensorFlow, and holds a few arrays instead of a TensorFlow runtime. Any other
optimizer, or one with gradient clipping, weight decay or EMA set, gets None from
`slice_optimizer`, and the shard falls back to the tf_keras optimizer itself.

The state is the list of arrays tf_keras keeps for one variable, in its order (`iterations`
first), so the two kinds of shard read and write the same checkpoints.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

_UNSUPPORTED_WHEN_SET = ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue")


class SliceOptimizer:
    """One optimizer's update rule over a float32 vector. Subclasses build `slots`."""

    slot_names: tuple = ()

    def __init__(self, config: dict, size: int, dtype):
        self.learning_rate = float(config["learning_rate"])
        self.iterations = np.zeros((), np.int64)
        self.slots = {name: np.zeros(size, dtype) for name in self.slot_names}

    def apply(self, values: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """Returns the slice after one step with `grad` (the state moves on)."""
        new = self._update(values, grad.astype(values.dtype, copy=False))
        self.iterations = self.iterations + 1
        return new

    def _update(self, values: np.ndarray, grad: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def get_state(self) -> List[np.ndarray]:
        return [np.asarray(self.iterations)] + [self.slots[n].copy() for n in self.slot_names]

    def set_state(self, state: List[np.ndarray]) -> None:
        if len(state) != 1 + len(self.slot_names):
            raise ValueError(f"{type(self).__name__} state has {1 + len(self.slot_names)} "
                             f"arrays (iterations, {', '.join(self.slot_names)}), got {len(state)}")
        self.iterations = np.asarray(state[0], np.int64)
        for name, value in zip(self.slot_names, state[1:]):
            self.slots[name] = np.array(value, dtype=self.slots[name].dtype)


class SGD(SliceOptimizer):
    slot_names = ("m",)  # tf_keras builds the momentum slot even at momentum 0

    def __init__(self, config: dict, size: int, dtype):
        super().__init__(config, size, dtype)
        self.momentum = float(config["momentum"])
        self.nesterov = bool(config["nesterov"])

    def _update(self, values, grad):
        lr, momentum = np.float32(self.learning_rate), np.float32(self.momentum)
        # at momentum 0 the slot holds the last step, as tf_keras's does
        m = self.slots["m"] = -grad * lr + self.slots["m"] * momentum
        return values + (-grad * lr + m * momentum if self.nesterov else m)


class Adam(SliceOptimizer):
    def __init__(self, config: dict, size: int, dtype):
        self.amsgrad = bool(config["amsgrad"])
        self.slot_names = ("m", "v", "vhat") if self.amsgrad else ("m", "v")
        super().__init__(config, size, dtype)
        self.beta_1, self.beta_2 = float(config["beta_1"]), float(config["beta_2"])
        self.epsilon = float(config["epsilon"])

    def _update(self, values, grad):
        f32 = np.float32
        step = f32(self.iterations + 1)
        beta_1_power, beta_2_power = f32(self.beta_1) ** step, f32(self.beta_2) ** step
        alpha = f32(self.learning_rate) * np.sqrt(f32(1) - beta_2_power) / (f32(1) - beta_1_power)
        m, v = self.slots["m"], self.slots["v"]
        m += (grad - m) * f32(1 - self.beta_1)
        v += (np.square(grad) - v) * f32(1 - self.beta_2)
        if self.amsgrad:
            np.maximum(self.slots["vhat"], v, out=self.slots["vhat"])
            v = self.slots["vhat"]
        return values - (m * alpha) / (np.sqrt(v) + f32(self.epsilon))


class RMSprop(SliceOptimizer):
    def __init__(self, config: dict, size: int, dtype):
        self.momentum, self.centered = float(config["momentum"]), bool(config["centered"])
        self.slot_names = ("velocity",) + (("momentum",) if self.momentum > 0 else ()) + (
            ("average_gradient",) if self.centered else ())
        super().__init__(config, size, dtype)
        self.rho, self.epsilon = float(config["rho"]), float(config["epsilon"])

    def _update(self, values, grad):
        f32 = np.float32
        rho = f32(self.rho)
        velocity = self.slots["velocity"] = rho * self.slots["velocity"] + (
            f32(1) - rho) * np.square(grad)
        if self.centered:
            average = self.slots["average_gradient"] = (
                rho * self.slots["average_gradient"] + (f32(1) - rho) * grad)
            denominator = velocity - np.square(average) + f32(self.epsilon)
        else:
            denominator = velocity + f32(self.epsilon)
        increment = f32(self.learning_rate) * grad / np.sqrt(denominator)
        if self.momentum > 0:
            momentum = self.slots["momentum"] = f32(self.momentum) * self.slots["momentum"] + \
                increment
            return values - momentum
        return values - increment


_RULES = {"SGD": SGD, "Adam": Adam, "RMSprop": RMSprop}


def slice_optimizer(serialized: dict, size: int, dtype=np.float32) -> Optional[SliceOptimizer]:
    """The numpy update rule of `tf_keras.optimizers.serialize(optimizer)` for a slice of
    `size` weights, or None when it is not one this module repeats exactly (another class, a
    learning rate schedule, clipping, weight decay, EMA, Adam's adaptive epsilon)."""
    rule = _RULES.get(serialized.get("class_name"))
    config = serialized.get("config") or {}
    if rule is None or not isinstance(config.get("learning_rate"), (int, float)):
        return None
    if any(config.get(key) is not None for key in _UNSUPPORTED_WHEN_SET):
        return None
    if config.get("use_ema") or config.get("adaptive_epsilon") or config.get(
            "is_legacy_optimizer"):
        return None
    if np.dtype(dtype) != np.float32:
        return None
    return rule(config, size, np.float32)
