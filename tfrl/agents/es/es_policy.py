"""ESPolicy: a deterministic fully connected policy whose parameters are one flat vector.

Evolution strategies never take gradients through the policy, so it runs in numpy: a forward
pass per env step costs microseconds and a worker needs no TensorFlow. Layer sizes and the
activation come from the `model` config (`fcnet_hiddens`, `fcnet_activation`). Discrete action
spaces take the argmax of the logits; Box action spaces with finite bounds squash the outputs
with tanh into the bounds (unbounded ones take the outputs as they are).
`export_model` writes the same network as a TensorFlow SavedModel for serving.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from tfrl import errors
from tfrl.config import merge_model_config

ACTIVATIONS = {"tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0), "linear": lambda x: x}


class ESPolicy:
    """Args:
      observation_space, action_space: gymnasium spaces (Box observations; Discrete or Box
        actions).
      model_config: `fcnet_hiddens` and `fcnet_activation` (tanh, relu or linear); keys it
        leaves out take MODEL_DEFAULTS' values.
      seed: seed of the initial parameters.

    Raises:
      UnsupportedSpaceError: observations that are not a Box, actions neither Discrete nor Box.
      InvalidConfigError: an unknown activation or model config key.
    """

    def __init__(self, observation_space, action_space, model_config: dict, seed: Optional[int] = 0):
        import gymnasium

        if not isinstance(observation_space, gymnasium.spaces.Box):
            raise errors.UnsupportedSpaceError(
                f"ES and ARS need a Box observation space, got {observation_space}; wrap the env "
                "to flatten its observations")
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        if not self.discrete and not isinstance(action_space, gymnasium.spaces.Box):
            raise errors.UnsupportedSpaceError(
                f"ES and ARS support Discrete and Box action spaces, got {action_space}")
        model_config = merge_model_config(model_config)
        activation = model_config["fcnet_activation"]
        if activation not in ACTIVATIONS:
            raise errors.InvalidConfigError(
                f"fcnet_activation {activation!r} is not supported by ES; use one of "
                f"{sorted(ACTIVATIONS)}")
        self.observation_space, self.action_space = observation_space, action_space
        self.activation_name = activation
        self.activation = ACTIVATIONS[activation]
        out = action_space.n if self.discrete else int(np.prod(action_space.shape))
        sizes = [int(np.prod(observation_space.shape)), *model_config["fcnet_hiddens"], out]
        self.shapes: List[Tuple[int, int]] = list(zip(sizes[:-1], sizes[1:]))
        self.num_params = sum(i * o + o for i, o in self.shapes)
        if not self.discrete:
            low, high = action_space.low.astype(np.float64), action_space.high.astype(np.float64)
            self.bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
            self.action_center, self.action_half_range = (high + low) / 2, (high - low) / 2
        self.set_flat_weights(self._initial_weights(seed))

    def _initial_weights(self, seed: Optional[int]) -> np.ndarray:
        """Columns of unit norm (normc), scaled by 0.01 in the last layer; zero biases."""
        rng = np.random.default_rng(seed)
        parts = []
        for index, (fan_in, fan_out) in enumerate(self.shapes):
            w = rng.standard_normal((fan_in, fan_out))
            w *= (0.01 if index == len(self.shapes) - 1 else 1.0) / np.sqrt(
                np.square(w).sum(axis=0, keepdims=True))
            parts += [w.ravel(), np.zeros(fan_out)]
        return np.concatenate(parts).astype(np.float32)

    def set_flat_weights(self, flat: np.ndarray) -> None:
        """Raises:
          InvalidConfigError: a vector of another length than num_params."""
        flat = np.asarray(flat, np.float32)
        if flat.shape != (self.num_params,):
            raise errors.InvalidConfigError(
                f"ES policy takes {self.num_params} parameters, got a vector of shape {flat.shape}")
        self.flat = flat.copy()
        self.layers, start = [], 0
        for fan_in, fan_out in self.shapes:
            w = self.flat[start:start + fan_in * fan_out].reshape(fan_in, fan_out)
            start += fan_in * fan_out
            self.layers.append((w, self.flat[start:start + fan_out]))
            start += fan_out

    def get_flat_weights(self) -> np.ndarray:
        return self.flat.copy()

    # the names other policies use, so nesting code handles ES policies alike
    get_weights = get_flat_weights
    set_weights = set_flat_weights

    def compute_action(self, obs: np.ndarray, action_noise_std: float = 0.0,
                       rng: Optional[np.random.Generator] = None):
        """The action for one (already filtered) observation."""
        x = np.asarray(obs, np.float32).ravel()
        for index, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if index < len(self.layers) - 1:
                x = self.activation(x)
        if self.discrete:
            return int(np.argmax(x))
        if action_noise_std and rng is not None:
            x = x + action_noise_std * rng.standard_normal(x.shape)
        x = x.reshape(self.action_space.shape)
        if self.bounded:
            return (self.action_center + self.action_half_range * np.tanh(x)).astype(
                self.action_space.dtype)
        return x.astype(self.action_space.dtype)

    def export_model(self, export_dir: str, observation_filter: Optional[dict] = None) -> None:
        """Writes the network (with the observation filter's statistics) as a SavedModel whose
        `serving_default` signature takes raw observations [batch, *obs_shape] as
        `observations` and returns `actions` and `deterministic_actions` (the same: the policy
        is deterministic), as other policies' exports do (tfrl/policy/export.py)."""
        import tensorflow as tf

        obs_shape = self.observation_space.shape
        policy = self

        class ServedPolicy(tf.Module):
            def __init__(self):
                super().__init__()
                self.layer_vars = [(tf.Variable(w), tf.Variable(b)) for w, b in policy.layers]

            @tf.function(input_signature=[
                tf.TensorSpec([None, *obs_shape], tf.float32, name="observations")])
            def serve(self, observations):
                x = tf.reshape(observations, [-1, int(np.prod(obs_shape))])
                if observation_filter is not None:
                    f = observation_filter
                    mean = tf.constant(np.ravel(f["mean"]), tf.float32)
                    std = tf.constant(np.ravel(f["std"]), tf.float32)
                    if f["demean"]:
                        x = x - mean
                    if f["destd"]:
                        x = x / (std + 1e-8)
                    if f["clip"] is not None:
                        x = tf.clip_by_value(x, -f["clip"], f["clip"])
                for index, (w, b) in enumerate(self.layer_vars):
                    x = tf.matmul(x, w) + b
                    if index < len(self.layer_vars) - 1:
                        x = {"tanh": tf.tanh, "relu": tf.nn.relu,
                             "linear": tf.identity}[policy.activation_name](x)
                if policy.discrete:
                    actions = tf.argmax(x, axis=-1)
                else:
                    actions = tf.reshape(x, [-1, *policy.action_space.shape])
                    if policy.bounded:
                        actions = (policy.action_center.astype(np.float32)
                                   + policy.action_half_range.astype(np.float32)
                                   * tf.tanh(actions))
                return {"actions": actions, "deterministic_actions": tf.identity(actions)}

        module = ServedPolicy()
        tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})


def rollout(policy: ESPolicy, env, observation_filter, horizon: Optional[int],
            rng: np.random.Generator, update_filter: bool, action_noise_std: float = 0.0):
    """Plays one episode (seeded from `rng`); returns (return, length)."""
    obs, _ = env.reset(seed=int(rng.integers(2 ** 31)))
    total, length = 0.0, 0
    while True:
        filtered = observation_filter(np.asarray(obs)[None], update=update_filter)[0]
        obs, reward, terminated, truncated, _ = env.step(
            policy.compute_action(filtered, action_noise_std, rng))
        total += float(reward)
        length += 1
        if terminated or truncated or (horizon is not None and length >= horizon):
            return total, length
