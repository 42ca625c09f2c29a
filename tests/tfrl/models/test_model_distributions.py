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


def test_closed_forms_match_tensorflow_probability():
    """The hand-written closed forms against tensorflow-probability's, the reference library."""
    import tensorflow_probability as tfp

    tfd = tfp.distributions
    logits, other = (RNG.normal(size=(6, 4)).astype(np.float32) for _ in range(2))
    logits[0, 1] = -np.inf  # a masked action: zero probability, finite entropy and KL
    actions = np.array([0, 2, 1, 3, 0, 2])
    ours, reference = Categorical(tf.constant(logits)), tfd.Categorical(logits=logits)
    np.testing.assert_allclose(ours.logp(actions), reference.log_prob(actions), rtol=1e-5)
    np.testing.assert_allclose(ours.entropy(), reference.entropy(), rtol=1e-5)
    np.testing.assert_allclose(ours.kl(Categorical(tf.constant(other))),
                               reference.kl_divergence(tfd.Categorical(logits=other)),
                               rtol=1e-4, atol=1e-6)
    assert np.all(np.isfinite(ours.entropy()))

    mean, mean2 = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    log_std, log_std2 = RNG.normal(scale=0.5, size=(2, 5, 3)).astype(np.float32)
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    ours = DiagGaussian(tf.constant(np.concatenate([mean, log_std], -1)))
    reference = tfd.Normal(mean, np.exp(log_std))
    np.testing.assert_allclose(ours.logp(x), reference.log_prob(x).numpy().sum(-1), rtol=1e-5)
    np.testing.assert_allclose(ours.entropy(), reference.entropy().numpy().sum(-1), rtol=1e-5)
    np.testing.assert_allclose(
        ours.kl(DiagGaussian(tf.constant(np.concatenate([mean2, log_std2], -1)))),
        reference.kl_divergence(tfd.Normal(mean2, np.exp(log_std2))).numpy().sum(-1),
        rtol=1e-5, atol=1e-6)


def test_gaussian_draws_are_seeded_reparameterised_and_follow_mean_and_std():
    mean, log_std = np.array([[1.5, -2.0]], np.float32), np.array([[-1.0, 0.5]], np.float32)
    inputs = tf.Variable(np.repeat(np.concatenate([mean, log_std], -1), 20000, axis=0))
    with tf.GradientTape() as tape:
        draws = DiagGaussian(inputs).sample(seed=tf.constant([7, 8]))
        total = tf.reduce_sum(draws)
    np.testing.assert_allclose(draws.numpy().mean(0), mean[0], atol=0.03)
    np.testing.assert_allclose(draws.numpy().std(0), np.exp(log_std[0]), rtol=0.03)
    # d(mean + std * noise)/d mean = 1: the draw is differentiable (SAC's losses rely on it)
    np.testing.assert_allclose(tape.gradient(total, inputs).numpy()[:, :2], 1.0)
    again = DiagGaussian(inputs).sample(seed=tf.constant([7, 8]))
    np.testing.assert_array_equal(draws.numpy(), again.numpy())
    assert not np.array_equal(DiagGaussian(inputs).sample().numpy(), draws.numpy())


def test_categorical_draws_are_seeded_and_multi_categorical_parts_independent():
    logits = tf.constant(np.zeros((5000, 3), np.float32))
    first = Categorical(logits).sample(seed=tf.constant([1, 1])).numpy()
    np.testing.assert_array_equal(first, Categorical(logits).sample(seed=tf.constant([1, 1])))
    np.testing.assert_allclose(np.bincount(first, minlength=3) / 5000, 1 / 3, atol=0.03)
    unseeded = Categorical(logits).sample().numpy()
    assert unseeded.dtype == np.int64 and set(np.unique(unseeded)) == {0, 1, 2}
    both = MultiCategorical(tf.constant(np.zeros((5000, 4), np.float32)),
                            input_lens=[2, 2]).sample(seed=tf.constant([2, 3])).numpy()
    # one seed split in two: the parts are not copies of each other
    assert 0.4 < np.mean(both[:, 0] == both[:, 1]) < 0.6
