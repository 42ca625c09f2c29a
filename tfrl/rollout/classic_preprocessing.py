"""Classic RLlib's observation preprocessing, for hand-written policies and TF policies with
classic custom models.

tfrl's TF policies take raw observations and preprocess them inside their traced functions
(tfrl/models/preprocessors.py). Classic RLlib preprocessed on the rollout worker instead: every
policy was built with the preprocessor's flat `Box` space (its `original_space` the env's) and
handed preprocessed observations, so a hand-written `Policy` (its own `compute_actions`, no
model) reads a `Discrete` observation as a one-hot vector and a `Dict` / `Tuple` one as the
flat concatenation of its parts (classic RLlib's OneHot / Dict / Tuple flattening
preprocessors; other spaces passed unchanged), and every sample batch and postprocessing function
saw those rows. A policy class says whether a policy of it with a given config takes them with
`takes_classic_observations(config)`: tfrl's `Policy` when it does not preprocess itself
(`preprocesses_observations` False), `TFPolicy` when its model is a classic custom model (whose
postprocessing, callbacks and loss read classic rows). For such a policy, the worker builds it with
`classic_observation_space` (tfrl/models/preprocessors.py) and preprocesses its observations
with a `ClassicPreprocessingFilter` in front of its observation filter.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import tree

from tfrl.rollout.filters import Filter
from tfrl.utils.rows import row_of


def needs_classic_preprocessing(policy_cls: Any, space: Any, config: dict) -> bool:
    """Whether a policy of `policy_cls` with `config` on `space` gets classic preprocessed
    observations: the class takes them (`takes_classic_observations`; a policy-like class
    without it, when it does not preprocess itself) and classic RLlib's preprocessor changed
    that space."""
    takes_classic = getattr(policy_cls, "takes_classic_observations", None)
    if takes_classic is None:
        if getattr(policy_cls, "preprocesses_observations", True):
            return False
    elif not takes_classic(config):
        return False
    # imported here: the preprocessors module imports TensorFlow, which workers of numpy
    # stand-ins must never load
    from tfrl.models.preprocessors import CLASSIC_PREPROCESSED_SPACES

    return isinstance(space, CLASSIC_PREPROCESSED_SPACES)


def preprocesses_for(policy: Any) -> bool:
    """Whether the worker preprocesses `policy`'s observations (it was built by the worker
    with `classic_observation_space`, whose `original_space` is the env's)."""
    return getattr(policy.observation_space, "original_space", None) is not None


class ClassicPreprocessingFilter(Filter):
    """Preprocesses a batch of raw observations of `original_space` (one row at a time, as
    classic RLlib's worker did), then applies `inner`, the policy's observation filter, whose
    statistics are the ones synchronised, saved and restored."""

    def __init__(self, original_space: gym.Space, inner: Filter):
        from tfrl.models.preprocessors import get_preprocessor

        self.original_space = original_space
        self.preprocessor = get_preprocessor(original_space)(original_space)
        self.inner = inner

    @property
    def stateless(self) -> bool:
        return self.inner.stateless

    def __call__(self, obs_batch: Any, update: bool = True) -> np.ndarray:
        rows = len(obs_batch) if isinstance(obs_batch, (np.ndarray, list)) else \
            len(tree.flatten(obs_batch)[0])
        flat = np.stack([self.preprocessor.transform(row_of(obs_batch, i)) for i in range(rows)]) \
            if rows else np.zeros((0, *self.preprocessor.shape), np.float32)
        return self.inner(flat, update)

    def apply_changes(self, other: Filter) -> None:
        self.inner.apply_changes(unwrapped_filter(other))

    def sync(self, other: Filter) -> None:
        self.inner.sync(unwrapped_filter(other))

    def clear_buffer(self) -> None:
        self.inner.clear_buffer()

    def get_state(self) -> dict:
        return self.inner.get_state()

    def serving_parameters(self):
        return self.inner.serving_parameters()

    def __repr__(self):
        return f"ClassicPreprocessingFilter({self.original_space}, {self.inner!r})"


def unwrapped_filter(observation_filter: Filter) -> Filter:
    """The observation filter behind classic preprocessing (the one whose state is saved and
    synchronised); any other filter as it is."""
    if isinstance(observation_filter, ClassicPreprocessingFilter):
        return observation_filter.inner
    return observation_filter
