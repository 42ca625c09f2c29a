"""Action distributions against closed forms (numpy), and the catalog's choice per space."""
import functools

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.errors import NotSupportedError, UnsupportedSpaceError
from tfrl.models import (Categorical, Deterministic, DiagGaussian, ModelCatalog,
                         MultiCategorical, SquashedGaussian)

RNG = np.random.default_rng(0)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _normal_logpdf(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def test_categorical():
    logits = RNG.normal(size=(5, 3)).astype(np.float32)
    other = RNG.normal(size=(5, 3)).astype(np.float32)
    d, o = Categorical(tf.constant(logits)), Categorical(tf.constant(other))
    actions = np.array([0, 2, 1, 1, 0])
    lp, lq = _log_softmax(logits), _log_softmax(other)
    p = np.exp(lp)
    np.testing.assert_allclose(d.logp(actions).numpy(), lp[np.arange(5), actions], rtol=1e-5)
    np.testing.assert_allclose(d.entropy().numpy(), -(p * lp).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(d.kl(o).numpy(), (p * (lp - lq)).sum(-1), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(d.deterministic_sample().numpy(), logits.argmax(-1))
    sample = d.sample(seed=tf.constant([1, 2]))
    np.testing.assert_allclose(d.sampled_action_logp().numpy(), d.logp(sample).numpy())
    assert Categorical.required_model_output_shape(gym.spaces.Discrete(7)) == 7


def test_categorical_samples_follow_the_probabilities():
    d = Categorical(tf.constant(np.log([[0.2, 0.8]] * 4000), tf.float32))
    freq = d.sample(seed=tf.constant([3, 4])).numpy().mean()
    assert abs(freq - 0.8) < 0.03


def test_multi_categorical():
    logits = RNG.normal(size=(4, 5)).astype(np.float32)
    d = MultiCategorical(tf.constant(logits), input_lens=[2, 3])
    actions = np.array([[0, 2], [1, 0], [1, 1], [0, 0]])
    la, lb = _log_softmax(logits[:, :2]), _log_softmax(logits[:, 2:])
    expected = la[np.arange(4), actions[:, 0]] + lb[np.arange(4), actions[:, 1]]
    np.testing.assert_allclose(d.logp(actions).numpy(), expected, rtol=1e-5)
    ent = -(np.exp(la) * la).sum(-1) - (np.exp(lb) * lb).sum(-1)
    np.testing.assert_allclose(d.entropy().numpy(), ent, rtol=1e-5)
    assert d.sample(seed=tf.constant([0, 1])).shape == (4, 2)
    np.testing.assert_allclose(d.kl(d).numpy(), 0.0, atol=1e-6)


def test_diag_gaussian():
    mean = RNG.normal(size=(3, 2)).astype(np.float32)
    log_std = RNG.normal(scale=0.3, size=(3, 2)).astype(np.float32)
    mean2, log_std2 = mean + 0.5, log_std - 0.2
    d = DiagGaussian(tf.constant(np.concatenate([mean, log_std], -1)))
    o = DiagGaussian(tf.constant(np.concatenate([mean2, log_std2], -1)))
    x = RNG.normal(size=(3, 2)).astype(np.float32)
    std, std2 = np.exp(log_std), np.exp(log_std2)
    np.testing.assert_allclose(d.logp(x).numpy(), _normal_logpdf(x, mean, std).sum(-1),
                               rtol=1e-5)
    np.testing.assert_allclose(d.entropy().numpy(),
                               (0.5 * np.log(2 * np.pi * np.e) + log_std).sum(-1), rtol=1e-5)
    kl = (log_std2 - log_std + (std ** 2 + (mean - mean2) ** 2) / (2 * std2 ** 2) - 0.5).sum(-1)
    np.testing.assert_allclose(d.kl(o).numpy(), kl, rtol=1e-5)
    np.testing.assert_allclose(d.deterministic_sample().numpy(), mean)
    assert DiagGaussian.required_model_output_shape(gym.spaces.Box(-1, 1, (4,))) == 8


def test_squashed_gaussian_change_of_variables():
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    mean = RNG.normal(size=(4, 2)).astype(np.float32)
    log_std = RNG.normal(scale=0.2, size=(4, 2)).astype(np.float32)
    d = SquashedGaussian(tf.constant(np.concatenate([mean, log_std], -1)), low=low, high=high)
    u = RNG.normal(size=(4, 2)).astype(np.float32)
    x = low + (np.tanh(u) + 1) * (high - low) / 2
    expected = (_normal_logpdf(u, mean, np.exp(log_std))
                - np.log((1 - np.tanh(u) ** 2) * (high - low) / 2)).sum(-1)
    np.testing.assert_allclose(d.logp(x).numpy(), expected, rtol=1e-3, atol=1e-3)
    samples = d.sample(seed=tf.constant([5, 6])).numpy()
    assert np.all(samples >= low) and np.all(samples <= high)
    np.testing.assert_allclose(d.sampled_action_logp().numpy(), d.logp(samples).numpy(),
                               rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(d.deterministic_sample().numpy(),
                               low + (np.tanh(mean) + 1) * (high - low) / 2, rtol=1e-5)
    with pytest.raises(NotSupportedError):
        d.entropy()
    with pytest.raises(NotSupportedError):
        d.kl(d)


def test_deterministic():
    x = RNG.normal(size=(3, 2)).astype(np.float32)
    d = Deterministic(tf.constant(x))
    np.testing.assert_array_equal(d.sample().numpy(), x)
    np.testing.assert_array_equal(d.deterministic_sample().numpy(), x)
    np.testing.assert_array_equal(d.logp(x).numpy(), np.zeros(3))
    np.testing.assert_array_equal(d.entropy().numpy(), np.zeros(3))


def test_catalog_picks_distributions():
    assert ModelCatalog.get_action_dist(gym.spaces.Discrete(4), {}) == (Categorical, 4)
    cls, n = ModelCatalog.get_action_dist(gym.spaces.MultiDiscrete([2, 5]), {})
    assert isinstance(cls, functools.partial) and cls.func is MultiCategorical and n == 7
    box = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    assert ModelCatalog.get_action_dist(box, {}) == (DiagGaussian, 6)
    assert ModelCatalog.get_action_dist(box, {}, dist_type="deterministic") == (Deterministic, 3)
    cls, n = ModelCatalog.get_action_dist(box, {"dist_type": "squashed_gaussian"})
    assert cls.func is SquashedGaussian and n == 6
    with pytest.raises(UnsupportedSpaceError, match="finite"):
        ModelCatalog.get_action_dist(gym.spaces.Box(-np.inf, np.inf, (2,)), {},
                                     dist_type="squashed_gaussian")
    with pytest.raises(UnsupportedSpaceError):
        ModelCatalog.get_action_dist(gym.spaces.Box(-1, 1, (2, 2)), {})
