"""Action distributions parameterised by model outputs, in plain TensorFlow ops.

The ModelCatalog picks one per action space (`ModelCatalog.get_action_dist`); a policy builds
it from the model's outputs (`dist_class(inputs, model)`) inside its traced functions to sample
actions, and inside the loss for log-probabilities, entropies and KLs.

Every class exposes: `sample(seed=None)`, `deterministic_sample()`, `logp(x)`, `entropy()`,
`kl(other)`, `sampled_action_logp()` (log-prob of the last `sample()`), and the static
`required_model_output_shape(action_space, model_config)`. `seed` may be a stateless seed (an
int tensor of shape [2]); with None, TensorFlow's stateful random ops are used.

The closed forms (categorical and normal log-probabilities, entropies, KLs; reparameterised
normal draws) are written here rather than taken from tensorflow-probability: importing it costs
about 0.7 s of CPU in every process that builds a policy, every rollout worker's start included,
and these five formulas are all the policies need. The tests check them against
tensorflow-probability's.
"""
from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.errors import NotSupportedError, UnsupportedSpaceError

# SAC-style clamps keep log-std and tanh inverse numerically safe.
MIN_LOG_STD = -20.0
MAX_LOG_STD = 2.0
SQUASH_EPS = 1e-6
_HALF_LOG_TWO_PI = 0.5 * float(np.log(2.0 * np.pi))


class _Normal:
    """Independent normals with elementwise mean and std (the closed forms the classes use)."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def sample(self, seed=None):
        """mean + std * noise: reparameterised, so gradients reach mean and std."""
        shape = tf.shape(self.mean)
        noise = (tf.random.normal(shape) if seed is None
                 else tf.random.stateless_normal(shape, seed))
        return self.mean + self.std * noise

    def log_prob(self, x):
        z = (x - self.mean) / self.std
        return -0.5 * tf.square(z) - tf.math.log(self.std) - _HALF_LOG_TWO_PI

    def entropy(self):
        return 0.5 + _HALF_LOG_TWO_PI + tf.math.log(self.std)

    def kl_divergence(self, other):
        # the form tensorflow-probability uses: stable when the two scales are close
        diff_log_scale = tf.math.log(self.std) - tf.math.log(other.std)
        return (0.5 * tf.square(self.mean / other.std - other.mean / other.std)
                + 0.5 * tf.math.expm1(2.0 * diff_log_scale) - diff_log_scale)


def _split_seed(seed, n: int):
    """`n` independent stateless seeds from one (or n Nones for stateful sampling)."""
    if seed is None:
        return [None] * n
    return tf.unstack(tf.random.experimental.stateless_split(seed, num=n), num=n)


class ActionDistribution:
    """Base class: `inputs` are the model outputs [B, num_outputs]."""

    def __init__(self, inputs, model=None):
        self.inputs = inputs
        self.model = model
        self._last_sample_logp = None

    def sample(self, seed=None):
        """A sampled action batch; remembers its log-prob for `sampled_action_logp`."""
        actions = self._sample(seed)
        self._last_sample_logp = self.logp(actions)
        return actions

    def _sample(self, seed):
        raise NotImplementedError

    def deterministic_sample(self):
        """The most likely action (mode or mean)."""
        raise NotImplementedError

    def logp(self, x):
        """Log-probability (density) of actions x, shape [B]."""
        raise NotImplementedError

    def entropy(self):
        """Entropy per row, shape [B]."""
        raise NotImplementedError

    def kl(self, other):
        """KL(self || other) per row, shape [B]."""
        raise NotImplementedError

    def sampled_action_logp(self):
        """Log-prob of the actions returned by the last `sample()` call.

        Raises:
            NotSupportedError: if `sample()` was not called first.
        """
        if self._last_sample_logp is None:
            raise NotSupportedError("Call sample() before sampled_action_logp().")
        return self._last_sample_logp

    @staticmethod
    def required_model_output_shape(action_space, model_config=None) -> int:
        """How many model outputs parameterise this distribution for `action_space`."""
        raise NotImplementedError


class Categorical(ActionDistribution):
    """One discrete action from logits [B, n]."""

    def _sample(self, seed):
        logits = tf.reshape(self.inputs, [-1, tf.shape(self.inputs)[-1]])
        draws = (tf.random.categorical(logits, 1, dtype=tf.int64) if seed is None else
                 tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int64))
        return tf.reshape(draws, tf.shape(self.inputs)[:-1])

    def deterministic_sample(self):
        return tf.argmax(self.inputs, axis=-1, output_type=tf.int64)

    def logp(self, x):
        return -tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(x, tf.int32), logits=self.inputs)

    def entropy(self):
        log_probs = tf.nn.log_softmax(self.inputs)
        return -tf.reduce_sum(tf.math.multiply_no_nan(log_probs, tf.exp(log_probs)), axis=-1)

    def kl(self, other):
        log_p = tf.nn.log_softmax(self.inputs)
        log_q = tf.nn.log_softmax(other.inputs)
        return tf.reduce_sum(tf.math.multiply_no_nan(log_p - log_q, tf.exp(log_p)), axis=-1)

    @staticmethod
    def required_model_output_shape(action_space, model_config=None):
        return int(action_space.n)


class MultiCategorical(ActionDistribution):
    """Several independent discrete actions; logits of each concatenated ([B, sum(input_lens)]).

    Build through `functools.partial(MultiCategorical, input_lens=[...])` (what the catalog
    returns for MultiDiscrete spaces).
    """

    def __init__(self, inputs, model=None, input_lens=()):
        super().__init__(inputs, model)
        self.input_lens = [int(n) for n in input_lens]
        self.cats = [Categorical(part, model)
                     for part in tf.split(inputs, self.input_lens, axis=-1)]

    def _sample(self, seed):
        seeds = _split_seed(seed, len(self.cats))
        return tf.stack([c._sample(s) for c, s in zip(self.cats, seeds)],  # noqa: SLF001 - same class family
                        axis=-1)

    def deterministic_sample(self):
        return tf.stack([c.deterministic_sample() for c in self.cats], axis=-1)

    def logp(self, x):
        x = tf.unstack(tf.cast(x, tf.int64), num=len(self.cats), axis=-1)
        return tf.add_n([c.logp(xi) for c, xi in zip(self.cats, x)])

    def entropy(self):
        return tf.add_n([c.entropy() for c in self.cats])

    def kl(self, other):
        return tf.add_n([a.kl(b) for a, b in zip(self.cats, other.cats)])

    @staticmethod
    def required_model_output_shape(action_space, model_config=None):
        return int(np.sum(action_space.nvec))


class DiagGaussian(ActionDistribution):
    """Independent normals; inputs are [mean, log_std] concatenated ([B, 2*dim])."""

    def __init__(self, inputs, model=None):
        super().__init__(inputs, model)
        self.mean, self.log_std = tf.split(inputs, 2, axis=-1)
        self.std = tf.exp(self.log_std)
        self.dist = _Normal(self.mean, self.std)

    def _sample(self, seed):
        return self.dist.sample(seed)

    def deterministic_sample(self):
        return self.mean

    def logp(self, x):
        return tf.reduce_sum(self.dist.log_prob(tf.cast(x, tf.float32)), axis=-1)

    def entropy(self):
        return tf.reduce_sum(self.dist.entropy(), axis=-1)

    def kl(self, other):
        return tf.reduce_sum(self.dist.kl_divergence(other.dist), axis=-1)

    @staticmethod
    def required_model_output_shape(action_space, model_config=None):
        return 2 * int(np.prod(action_space.shape))


class SquashedGaussian(ActionDistribution):
    """tanh-squashed normal rescaled to [low, high] (SAC). Inputs are [mean, log_std].

    Build through `functools.partial(SquashedGaussian, low=..., high=...)` (what the catalog
    returns for bounded Box spaces with `dist_type="squashed_gaussian"`). logp applies the
    change-of-variables correction. `sample_and_logp` is the reparameterised sample SAC's
    losses differentiate through (actions and their log-density from the same pre-squash
    draw, gradients flowing into mean and log-std). Entropy and KL have no closed form: they
    raise NotSupportedError (SAC uses -logp of sampled actions instead).
    """

    def __init__(self, inputs, model=None, low=-1.0, high=1.0):
        super().__init__(inputs, model)
        mean, log_std = tf.split(inputs, 2, axis=-1)
        self.mean = mean
        self.log_std = tf.clip_by_value(log_std, MIN_LOG_STD, MAX_LOG_STD)
        self.low = tf.constant(np.asarray(low, np.float32))
        self.high = tf.constant(np.asarray(high, np.float32))
        self.dist = _Normal(self.mean, tf.exp(self.log_std))

    def _squash(self, u):
        return self.low + (tf.tanh(u) + 1.0) * (self.high - self.low) / 2.0

    def _unsquash(self, x):
        y = (x - self.low) * 2.0 / (self.high - self.low) - 1.0
        y = tf.clip_by_value(y, -1.0 + SQUASH_EPS, 1.0 - SQUASH_EPS)
        return tf.atanh(y)

    def _sample(self, seed):
        return self._squash(self.dist.sample(seed))

    def sample(self, seed=None):
        actions, logp = self.sample_and_logp(seed)
        self._last_sample_logp = logp
        return actions

    def sample_and_logp(self, seed=None):
        """(actions [B, dim], logp [B]) from one reparameterised draw u = mean + std * eps.

        The log-density is computed from u itself, not by inverting tanh of the action, so it
        stays exact (and its gradient finite) where tanh saturates; both outputs are
        differentiable with respect to the distribution's inputs.
        """
        u = self.dist.sample(seed)
        return self._squash(u), self._logp_from_u(u)

    def deterministic_sample(self):
        return self._squash(self.mean)

    def _logp_from_u(self, u):
        # log p(x) = log N(u) - sum log |dx/du|, dx/du = (1 - tanh(u)^2) * (high - low) / 2,
        # with log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)) (exact, no epsilon).
        log_det = 2.0 * (np.log(2.0) - u - tf.nn.softplus(-2.0 * u)) + tf.math.log(
            (self.high - self.low) / 2.0)
        return tf.reduce_sum(self.dist.log_prob(u) - log_det, axis=-1)

    def logp(self, x):
        return self._logp_from_u(self._unsquash(tf.cast(x, tf.float32)))

    def entropy(self):
        """Raises NotSupportedError: no closed form (use -sampled_action_logp())."""
        raise NotSupportedError(
            "SquashedGaussian has no closed-form entropy; use -sampled_action_logp() as a "
            "one-sample estimate.")

    def kl(self, other):
        """Raises NotSupportedError: no closed form."""
        raise NotSupportedError(
            "SquashedGaussian has no closed-form KL; compare DiagGaussian pre-squash "
            "distributions instead.")

    @staticmethod
    def required_model_output_shape(action_space, model_config=None):
        return 2 * int(np.prod(action_space.shape))


class Deterministic(ActionDistribution):
    """A point mass at the model output (DDPG/TD3 actors): sample = deterministic_sample = x."""

    def _sample(self, seed):
        return self.inputs

    def deterministic_sample(self):
        return self.inputs

    def logp(self, x):
        return tf.zeros(tf.shape(self.inputs)[:1], tf.float32)

    def entropy(self):
        return tf.zeros(tf.shape(self.inputs)[:1], tf.float32)

    def kl(self, other):
        return tf.zeros(tf.shape(self.inputs)[:1], tf.float32)

    @staticmethod
    def required_model_output_shape(action_space, model_config=None):
        return int(np.prod(action_space.shape))


DIST_TYPES = ("categorical", "multi_categorical", "diag_gaussian", "squashed_gaussian",
              "deterministic")


def required_output_size(dist_class, action_space, model_config=None) -> int:
    """`required_model_output_shape` that also works for functools.partial dist classes."""
    base = dist_class.func if isinstance(dist_class, functools.partial) else dist_class
    return base.required_model_output_shape(action_space, model_config)


def action_dist_for_space(action_space, dist_type=None):
    """(dist_class, num_outputs) for an action space; see ModelCatalog.get_action_dist.

    Raises:
        UnsupportedSpaceError: if the space or the combination with `dist_type` is unsupported.
    """
    if isinstance(action_space, gym.spaces.Discrete) and dist_type in (None, "categorical"):
        return Categorical, int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and dist_type in (
            None, "multi_categorical"):
        nvec = [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]
        return functools.partial(MultiCategorical, input_lens=nvec), int(sum(nvec))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        dim = int(action_space.shape[0])
        if dist_type in (None, "diag_gaussian"):
            return DiagGaussian, 2 * dim
        if dist_type == "deterministic":
            return Deterministic, dim
        if dist_type == "squashed_gaussian":
            if not (np.all(np.isfinite(action_space.low)) and np.all(
                    np.isfinite(action_space.high))):
                raise UnsupportedSpaceError(
                    "SquashedGaussian needs a Box action space with finite low/high bounds; "
                    "bound the action space or use dist_type='diag_gaussian'.")
            return functools.partial(SquashedGaussian, low=action_space.low.astype(np.float32),
                                     high=action_space.high.astype(np.float32)), 2 * dim
    raise UnsupportedSpaceError(
        f"No action distribution for action space {action_space!r} with dist_type="
        f"{dist_type!r}; supported: Discrete (categorical), MultiDiscrete (multi_categorical), "
        "1-D Box (diag_gaussian, squashed_gaussian, deterministic).")
