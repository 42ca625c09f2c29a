"""NumpyActor: a policy's action function in numpy, for acting at application speed.

Two callers act with it instead of a TensorFlow call: a `PolicyClient` in local mode (and the
policy server's inline answers), one observation at a time, and a rollout worker's env runner,
one batch of all its envs per step (`act_batch`; the runner then computes the rows' value and
likelihood outputs with the TensorFlow policy in one call per fragment, see
`tfrl.rollout.sampler`). A TensorFlow call costs a quarter of a millisecond or more whatever the network; the
default fully connected policies (the catalog's `FullyConnectedNetwork` with a `Categorical` or
`DiagGaussian` action distribution, no recurrent state, actions drawn from the distribution as
`TFPolicy` draws them) need only a few small matrix products, which numpy does in tens of
microseconds. `NumpyActor.from_policy` reads such a policy's weights into numpy; for any other
policy (DQN's epsilon-greedy sampler, vision or recurrent models, custom distributions) it
returns None and the client keeps using the TensorFlow policy.

The actions follow the same distribution as the TensorFlow policy's (the same logits or
mean / log-std, sampled when exploring, the mode otherwise), not the same random draws.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import tree

_ACTIVATIONS: dict = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
}


class NumpyActor:
    """The action function of a supported policy in numpy (see the module docstring).

    Args:
      preprocess: raw observation -> flat float vector (the model's preprocessor).
      layers: (kernel, bias, activation) of the policy trunk, input to output, the last one
        producing the distribution inputs.
      distribution: "categorical" or "diag_gaussian".
      seed: the random generator's seed (None: fresh entropy).
      flat_observations: raw observations are flat float vectors already (rank-1 Box), so a
        batch of them needs no per-row preprocessing.
    """

    def __init__(self, preprocess: Callable[[Any], np.ndarray],
                 layers: List[Tuple[np.ndarray, np.ndarray, Callable]], distribution: str,
                 seed: Any = None, flat_observations: bool = False):
        self._preprocess = preprocess
        self._layers = layers
        self.distribution = distribution
        self._rng = np.random.default_rng(seed)
        self._flat_observations = bool(flat_observations)

    @classmethod
    def from_policy(cls, policy, seed: Any = None) -> Optional["NumpyActor"]:
        """The numpy actor of `policy` with its current weights, or None when the policy is not
        one this module can reproduce. `seed`: anything `np.random.default_rng` takes."""
        found = cls._read_policy(policy)
        if found is None:
            return None
        preprocess, layers, distribution = found
        space = policy.observation_space
        return cls(preprocess, layers, distribution, seed,
                   flat_observations=isinstance(space, gym.spaces.Box) and len(space.shape) == 1)

    def load_weights(self, policy) -> None:
        """Reads `policy`'s current weights (the policy this actor was made from); the random
        generator goes on where it was."""
        found = self._read_policy(policy)
        if found is None:
            raise ValueError(f"{type(policy).__name__} is no longer a policy NumpyActor reproduces")
        self._layers = found[1]

    @staticmethod
    def _read_policy(policy):
        """(preprocess, layers, distribution) of a supported policy, else None."""
        from tfrl.models.distributions import Categorical, DiagGaussian
        from tfrl.models.fcnet import FullyConnectedNetwork
        from tfrl.policy.tf_policy import TFPolicy

        cls_ = type(policy)
        if not isinstance(policy, TFPolicy) or any(
                getattr(cls_, name) is not getattr(TFPolicy, name)
                for name in ("action_sampler", "action_distribution")):
            return None
        model = getattr(policy, "model", None)
        if type(model) is not FullyConnectedNetwork or policy.get_initial_state():
            return None
        distributions = {Categorical: "categorical", DiagGaussian: "diag_gaussian"}
        distribution = distributions.get(policy.dist_class)
        if distribution is None or model.num_outputs != policy.logit_dim:
            return None
        layers = []
        names = [f"fc_{i}" for i in range(len(model.model_config["fcnet_hiddens"]))] + ["fc_out"]
        for name in names:
            layer = model.base_model.get_layer(name)
            activation = getattr(layer.activation, "__name__", None)
            if activation not in _ACTIVATIONS or not layer.use_bias:
                return None
            kernel, bias = (np.asarray(w, np.float64) for w in layer.get_weights())
            layers.append((kernel, bias, _ACTIVATIONS[activation]))
        return model.preprocessor.transform, layers, distribution

    def distribution_inputs(self, observation: Any) -> np.ndarray:
        """The distribution inputs (logits, or mean and log-std) for one raw observation."""
        return forward(self._layers,
                       np.asarray(self._preprocess(observation), np.float64).reshape(-1))

    def act(self, observation: Any, explore: bool = True) -> np.ndarray:
        """One action for one raw observation, with a leading batch dimension of 1 (as
        `compute_actions` returns it): int64 for categorical, float32 for Gaussian."""
        inputs = self.distribution_inputs(observation)
        if self.distribution == "categorical":
            return np.array([self._categorical_draw(inputs, explore)], np.int64)
        mean, log_std = np.split(inputs, 2)
        if explore:
            mean = mean + np.exp(log_std) * self._rng.standard_normal(mean.shape)
        return mean.astype(np.float32)[None]

    def categorical_index(self, flat_observation: np.ndarray, explore: bool = True) -> int:
        """A categorical policy's action for one observation that is a flat float32 vector
        already (a rank-1 float32 Box's, which preprocessing leaves as it is), as a plain int:
        `act` with less work per call, for answering one request at a time."""
        return self._categorical_draw(forward(self._layers, flat_observation), explore)

    def _categorical_draw(self, logits: np.ndarray, explore: bool) -> int:
        if not explore:
            return int(np.argmax(logits))
        weights = np.exp(logits - logits.max()).tolist()
        threshold = self._rng.random() * sum(weights)
        for i, weight in enumerate(weights):  # a few actions: plain floats beat numpy here
            threshold -= weight
            if threshold < 0:
                return i
        return len(weights) - 1

    def act_batch(self, observations: Any, explore: bool = True) -> np.ndarray:
        """Actions for a batch of raw observations (an array [B, ...], or a nest of such arrays
        for nested spaces): int64 [B] for categorical, float32 [B, action_dim] for Gaussian,
        each drawn as `act` draws it (a categorical sample by the Gumbel-max trick)."""
        return self.draw(self.batch_distribution_inputs(observations), explore)

    def batch_distribution_inputs(self, observations: Any) -> np.ndarray:
        """The distribution inputs [B, ...] (float64) for a batch of raw observations."""
        if self._flat_observations and isinstance(observations, np.ndarray):
            x = observations.astype(np.float64, copy=False).reshape(len(observations), -1)
        else:
            from tfrl.rollout.trajectory import row_of

            count = len(tree.flatten(observations)[0])
            x = np.stack([np.asarray(self._preprocess(row_of(observations, i)), np.float64)
                          .reshape(-1) for i in range(count)])
        return forward(self._layers, x)

    def draw(self, inputs: np.ndarray, explore: bool = True) -> np.ndarray:
        """Actions for a batch of distribution inputs (see `act_batch`)."""
        if self.distribution == "categorical":
            if explore:
                inputs = inputs - np.log(-np.log(self._rng.random(inputs.shape)))
            return np.argmax(inputs, axis=1).astype(np.int64)
        mean, log_std = np.split(inputs, 2, axis=1)
        if explore:
            mean = mean + np.exp(log_std) * self._rng.standard_normal(mean.shape)
        return mean.astype(np.float32)


def forward(layers: List[Tuple[np.ndarray, np.ndarray, Callable]], x: np.ndarray) -> np.ndarray:
    """`x` through dense layers given as (kernel, bias, activation), input to output."""
    for kernel, bias, activation in layers:
        x = activation(x @ kernel + bias)
    return x
