"""Optimizers on a flat parameter vector (ES: Adam; ARS: plain SGD ascent).

`update(theta, gradient)` returns the new parameters; `gradient` is the direction of descent
(ES passes minus its estimate of the return gradient plus the L2 term). The state is plain
numpy data for checkpoints.
"""
from __future__ import annotations

import numpy as np


class SGD:
    """theta - stepsize * gradient."""

    def __init__(self, dim: int, stepsize: float):
        self.dim, self.stepsize, self.t = dim, float(stepsize), 0

    def update(self, theta: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        self.t += 1
        return theta - self.stepsize * gradient

    def get_state(self) -> dict:
        return {"t": self.t}

    def set_state(self, state: dict) -> None:
        self.t = int(state["t"])


class Adam(SGD):
    """Adam (Kingma and Ba) with bias correction, as in Salimans et al.'s ES code."""

    def __init__(self, dim: int, stepsize: float, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8):
        super().__init__(dim, stepsize)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.m = np.zeros(dim, np.float64)
        self.v = np.zeros(dim, np.float64)

    def update(self, theta: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        self.t += 1
        a = self.stepsize * np.sqrt(1 - self.beta2 ** self.t) / (1 - self.beta1 ** self.t)
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * gradient * gradient
        return theta - a * self.m / (np.sqrt(self.v) + self.epsilon)

    def get_state(self) -> dict:
        return {"t": self.t, "m": self.m.copy(), "v": self.v.copy()}

    def set_state(self, state: dict) -> None:
        self.t = int(state["t"])
        self.m = np.asarray(state["m"], np.float64).reshape(self.dim)
        self.v = np.asarray(state["v"], np.float64).reshape(self.dim)
