"""The policy+value network as a list of numpy arrays, and its forward pass in numpy.

Weights travel between the actors as plain arrays (through the Ray object store): the learner
(examples/alphazero/learner.py) trains the same layers in TensorFlow, while self-play and
evaluator actors run this numpy forward pass inside the search, one position at a time, with
no TensorFlow in their processes. Layout: hidden layers (kernel, bias)..., then the policy head
(kernel, bias) and the value head (kernel, bias).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

Weights = List[np.ndarray]


def initial_weights(observation_size: int, num_actions: int, hidden: Sequence[int] = (128, 128),
                    seed: int = 0) -> Weights:
    """Glorot-uniform kernels and zero biases, the same for the same seed."""
    rng = np.random.default_rng(seed)
    weights = []
    sizes = [observation_size, *hidden]
    for fan_in, fan_out in [*zip(sizes[:-1], sizes[1:]), (sizes[-1], num_actions), (sizes[-1], 1)]:
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32))
        weights.append(np.zeros(fan_out, np.float32))
    return weights


def forward(weights: Weights, observations: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(policy logits [B, actions], values [B] in (-1, 1)) for observations [B, ...]."""
    x = observations.reshape(len(observations), -1)
    for kernel, bias in zip(weights[:-4:2], weights[1:-4:2]):
        x = np.maximum(x @ kernel + bias, 0.0)
    logits = x @ weights[-4] + weights[-3]
    values = np.tanh(x @ weights[-2] + weights[-1])[:, 0]
    return logits, values


def evaluator(weights: Weights):
    """A search evaluator for one state: (prior over legal moves, value for the player to move)."""
    def evaluate(state):
        logits, values = forward(weights, state.observation()[None])
        legal = state.legal_mask()
        logits = np.where(legal, logits[0], -np.inf)
        priors = np.exp(logits - logits.max())
        return priors / priors.sum(), float(values[0])
    return evaluate


def uniform_evaluator(state):
    """A network-free evaluator: equal priors over legal moves, value 0."""
    legal = state.legal_mask().astype(np.float64)
    return legal / legal.sum(), 0.0
