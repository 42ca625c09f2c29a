"""NumpyActor: a policy's action function in numpy, for acting at application speed.

Two callers act with it instead of a TensorFlow call: a `PolicyClient` in local mode (and the
policy server's inline answers), one observation at a time, and a rollout worker's env runner,
one batch of all its envs per step (`act_batch`; the runner then computes the rows' value and
likelihood outputs in one batch per fragment, see `tfrl.rollout.sampler`). A TensorFlow call
costs a quarter of a millisecond or more whatever the network; the
default fully connected policies (the catalog's `FullyConnectedNetwork` with a `Categorical` or
`DiagGaussian` action distribution, no recurrent state, actions drawn from the distribution as
`TFPolicy` draws them) need only a few small matrix products, which numpy does in tens of
microseconds. `NumpyActor.from_policy` reads such a policy's weights into numpy; for any other
policy (DQN's epsilon-greedy sampler, vision or recurrent models, custom distributions) it
returns None and the client keeps using the TensorFlow policy.

Where the policy's extra outputs are TFPolicy's own (distribution inputs, value prediction and
log-likelihood; no `extra_action_out` of its own), the actor computes them too
(`outputs_of_actions`, `reproduces_outputs`), so the rows its actions were drawn for need no
TensorFlow call at all: a TensorFlow call in a serving process holds the interpreter for a
millisecond or more, and every request arriving meanwhile waits for it.

The actions follow the same distribution as the TensorFlow policy's (the same logits or
mean / log-std, sampled when exploring, the mode otherwise), not the same random draws.
"""
from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Tuple

import gymnasium as gym
import numpy as np
import tree

from tfrl.policy.sample_batch import SampleBatch
from tfrl.utils.rows import row_of

_LOG_2PI = float(np.log(2.0 * np.pi))
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
      value_layers: the value branch as (kernel, bias, activation) layers, or None when the
        actor is not to compute the policy's extra outputs (see `outputs_of_actions`).
      value_shares_trunk: the value branch's one layer reads the policy trunk's last hidden
        layer; False: `value_layers` is a trunk of its own on the observations.
    """

    def __init__(self, preprocess: Callable[[Any], np.ndarray],
                 layers: List[Tuple[np.ndarray, np.ndarray, Callable]], distribution: str,
                 seed: Any = None, flat_observations: bool = False,
                 value_layers: Optional[List[Tuple[np.ndarray, np.ndarray, Callable]]] = None,
                 value_shares_trunk: bool = False):
        self._preprocess = preprocess
        self._layers = layers
        self.distribution = distribution
        self._rng = np.random.default_rng(seed)
        self._flat_observations = bool(flat_observations)
        self._value_layers = value_layers
        self._value_shares_trunk = bool(value_shares_trunk)
        self._reader: Optional[_WeightReader] = None  # set by from_policy

    @property
    def reproduces_outputs(self) -> bool:
        """Whether `outputs_of_actions` gives the policy's extra outputs."""
        return self._value_layers is not None

    @property
    def multiply_adds_per_row(self) -> int:
        """The multiply-adds `outputs_of_actions` spends on one row (both trunks)."""
        return sum(kernel.size for kernel, _, _ in self._layers + (self._value_layers or []))

    @classmethod
    def from_policy(cls, policy, seed: Any = None) -> Optional["NumpyActor"]:
        """The numpy actor of `policy` with its current weights, or None when the policy is not
        one this module can reproduce. `seed`: anything `np.random.default_rng` takes."""
        found = cls._read_policy(policy)
        if found is None:
            return None
        preprocess, layers, distribution, value_layers, value_shares_trunk = found
        space = policy.observation_space
        actor = cls(preprocess, layers, distribution, seed,
                    flat_observations=isinstance(space, gym.spaces.Box) and len(space.shape) == 1,
                    value_layers=value_layers, value_shares_trunk=value_shares_trunk)
        actor._reader = _WeightReader(policy, cls._layer_names(policy, value_layers is not None))
        return actor

    def load_weights(self, policy) -> None:
        """Reads `policy`'s current weights (the policy this actor was made from); the random
        generator goes on where it was."""
        reader = self._reader
        if reader is not None and reader.policy is policy:
            arrays = reader.read()
            layers = [(arrays[2 * i], arrays[2 * i + 1], layer[2])
                      for i, layer in enumerate(self._layers + (self._value_layers or []))]
            count = len(self._layers)
            self._layers, self._value_layers = layers[:count], layers[count:] or None
            return
        found = self._read_policy(policy)
        if found is None:
            raise ValueError(f"{type(policy).__name__} is no longer a policy NumpyActor reproduces")
        self._layers, self._value_layers = found[1], found[3]
        self._reader = _WeightReader(policy, self._layer_names(policy, found[3] is not None))

    @staticmethod
    def _layer_names(policy, with_value: bool) -> Tuple[List[str], List[str]]:
        """The names of the policy trunk's dense layers and of the value branch's (empty
        without `with_value`), input to output."""
        config = policy.model.model_config
        hidden = range(len(config["fcnet_hiddens"]))
        trunk = [f"fc_{i}" for i in hidden] + ["fc_out"]
        if not with_value:
            return trunk, []
        return trunk, (["value_out"] if config["vf_share_layers"] else
                       [f"fc_value_{i}" for i in hidden] + ["value_out"])

    @staticmethod
    def _read_policy(policy):
        """(preprocess, layers, distribution, value layers or None, whether the value branch
        shares the trunk) of a supported policy, else None."""
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
        trunk, value = NumpyActor._layer_names(policy, policy.extra_outputs_are_standard())
        layers = _read_layers(model, trunk)
        if layers is None:
            return None
        value_layers = _read_layers(model, value) if value else None
        return (model.preprocessor.transform, layers, distribution, value_layers,
                bool(model.model_config["vf_share_layers"]))

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
        # one row of a few logits: plain floats beat numpy calls here
        logits = logits.tolist()
        top = max(logits)
        weights = [math.exp(logit - top) for logit in logits]
        threshold = self._rng.random() * sum(weights)
        for i, weight in enumerate(weights):
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
        return forward(self._layers, self._model_inputs(observations))

    def _model_inputs(self, observations: Any) -> np.ndarray:
        """The flat float64 model inputs [B, size] of a batch of raw observations."""
        if self._flat_observations and isinstance(observations, np.ndarray):
            return observations.astype(np.float64, copy=False).reshape(len(observations), -1)
        count = len(tree.flatten(observations)[0])
        return np.stack([np.asarray(self._preprocess(row_of(observations, i)), np.float64)
                         .reshape(-1) for i in range(count)])

    def outputs_of_actions(self, observations: Any, actions: Any) -> tuple:
        """(actions, extra outputs) as `TFPolicy.compute_outputs_of_actions` gives them for a
        batch of raw observations and the actions chosen for them: the actions in the policy's
        action dtype (int64 or float32), and action_dist_inputs, vf_preds and action_logp as
        float32 columns. Only for an actor that `reproduces_outputs`.

        Raises:
          NotSupportedError: the actor does not reproduce the policy's extra outputs.
        """
        if self._value_layers is None:
            from tfrl.errors import NotSupportedError

            raise NotSupportedError("this policy's extra outputs are its own; ask the policy "
                                    "(compute_outputs_of_actions)")
        x = self._model_inputs(observations)
        trunk = forward(self._layers[:-1], x)
        inputs = forward(self._layers[-1:], trunk)
        value = forward(self._value_layers, trunk if self._value_shares_trunk else x)
        actions = np.asarray(actions).astype(
            np.int64 if self.distribution == "categorical" else np.float32, copy=False)
        return actions, {SampleBatch.ACTION_DIST_INPUTS: inputs.astype(np.float32),
                         SampleBatch.VF_PREDS: value[:, 0].astype(np.float32),
                         SampleBatch.ACTION_LOGP: log_likelihoods(self.distribution, inputs,
                                                                  actions)}

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


def _read_layers(model, names: List[str]):
    """(kernel, bias, activation) of the named dense layers of `model`'s base model as float64,
    or None when one of them is not a biased dense layer of a known activation."""
    layers = []
    for name in names:
        layer = model.base_model.get_layer(name)
        activation = getattr(layer.activation, "__name__", None)
        if activation not in _ACTIVATIONS or not layer.use_bias:
            return None
        kernel, bias = (np.asarray(w, np.float64) for w in layer.get_weights())
        layers.append((kernel, bias, _ACTIVATIONS[activation]))
    return layers


def log_likelihoods(distribution: str, inputs: np.ndarray, actions: Any) -> np.ndarray:
    """log pi(actions) [B] (float32) under the "categorical" or "diag_gaussian" distribution
    with these inputs [B, ...] (logits, or mean and log-std), as TensorFlow's `logp` gives it."""
    if distribution == "categorical":
        shifted = inputs - inputs.max(axis=1, keepdims=True)
        index = np.asarray(actions, np.int64).reshape(-1)
        return (shifted[np.arange(len(index)), index]
                - np.log(np.exp(shifted).sum(axis=1))).astype(np.float32)
    mean, log_std = np.split(inputs, 2, axis=1)
    z = (np.asarray(actions, np.float32).reshape(mean.shape) - mean) / np.exp(log_std)
    return (-0.5 * np.sum(z * z, axis=1) - np.sum(log_std, axis=1)
            - 0.5 * _LOG_2PI * mean.shape[1]).astype(np.float32)


class _WeightReader:
    """The weights of an actor's dense layers read from its policy in one TensorFlow call (a
    read per variable costs a TensorFlow call each; an actor refreshed at every sample() of a
    serving worker reads a dozen)."""

    def __init__(self, policy, names: Tuple[List[str], List[str]]):
        import tensorflow as tf

        self.policy = policy
        get_layer = policy.model.base_model.get_layer
        variables = [v for name in names[0] + names[1]
                     for v in (get_layer(name).kernel, get_layer(name).bias)]
        self._shapes = [tuple(v.shape) for v in variables]
        self._ends = np.cumsum([int(np.prod(shape)) for shape in self._shapes])[:-1]
        self._read = tf.function(
            lambda: tf.concat([tf.reshape(tf.cast(v, tf.float64), [-1]) for v in variables], 0),
            autograph=False).get_concrete_function()

    def read(self) -> List[np.ndarray]:
        """Each variable's current value, in the order of the layers, kernel before bias."""
        return [part.reshape(shape) for part, shape in
                zip(np.split(self._read().numpy(), self._ends), self._shapes)]


def forward(layers: List[Tuple[np.ndarray, np.ndarray, Callable]], x: np.ndarray) -> np.ndarray:
    """`x` through dense layers given as (kernel, bias, activation), input to output."""
    for kernel, bias, activation in layers:
        x = activation(x @ kernel + bias)
    return x
