"""SAC policy: losses against a hand-computed linear case, entropy tuning direction, polyak
target critics, action bounds, and the squashed Gaussian's reparameterised sample."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.sac import DEFAULT_CONFIG, SACTFPolicy
from tfrl.agents.sac.sac import validate_config
from tfrl.errors import InvalidConfigError
from tfrl.models.distributions import SquashedGaussian
from tfrl.policy import SampleBatch

from tests.tfrl.agents.agent_helpers import trainer_config

OBS_SPACE = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACTION_SPACE = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32))
LOW, HIGH = ACTION_SPACE.low.astype(np.float64), ACTION_SPACE.high.astype(np.float64)
HALF_RANGE = (HIGH - LOW) / 2


def sac_policy(**overrides):
    config = dict(actor_hiddens=[8], critic_hiddens=[8])
    config.update(overrides)
    return SACTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(DEFAULT_CONFIG, **config))


def set_linear(stack, kernel, bias):
    layer = stack.layers[-1]
    layer.kernel.assign(np.asarray(kernel, np.float32).reshape(layer.kernel.shape))
    layer.bias.assign(np.asarray(bias, np.float32).reshape(layer.bias.shape))


def make_batch(rng, n=8):
    return SampleBatch({
        SampleBatch.OBS: rng.normal(size=(n, 2)).astype(np.float32),
        SampleBatch.NEXT_OBS: rng.normal(size=(n, 2)).astype(np.float32),
        SampleBatch.ACTIONS: rng.uniform(LOW, HIGH, size=(n, 2)).astype(np.float32),
        SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
        SampleBatch.TERMINATEDS: np.array([False, False, True, False] * (n // 4)),
        SampleBatch.N_STEPS: np.array([1, 3] * (n // 2), np.int64),
        SampleBatch.PRIO_WEIGHTS: rng.uniform(0.5, 1.0, size=n).astype(np.float32)})


def normal_logpdf(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def hand_logp(actions, mean, log_std):
    """log-density of squashed-Gaussian actions, computed from the actions alone."""
    u = np.arctanh((np.asarray(actions, np.float64) - LOW) / HALF_RANGE - 1)
    return (normal_logpdf(u, mean, np.exp(log_std))
            - np.log((1 - np.tanh(u) ** 2) * HALF_RANGE)).sum(-1)


def test_sac_losses_match_a_hand_computed_linear_case():
    rng = np.random.default_rng(0)
    policy = sac_policy(actor_hiddens=[], critic_hiddens=[], gamma=0.9, initial_alpha=0.3,
                        target_entropy=-1.5)
    wa, ba = rng.normal(scale=0.5, size=(2, 4)), rng.normal(scale=0.3, size=4)
    wq = [rng.normal(size=4), rng.normal(size=4)]
    bq = [0.3, -0.2]
    wq_t = [rng.normal(size=4), rng.normal(size=4)]
    bq_t = [0.1, 0.5]
    set_linear(policy.model.actor, wa, ba)
    for i in range(2):
        set_linear(policy.model.critics[i], wq[i], bq[i])
        set_linear(policy.target_model.critics[i], wq_t[i], bq_t[i])
    batch = make_batch(rng)
    obs, new_obs = batch["obs"].astype(np.float64), batch["new_obs"].astype(np.float64)

    tf.random.set_seed(11)
    loss, stats, per_sample = policy.loss_and_stats(
        {k: tf.constant(batch[k], s.dtype) for k, s in policy.loss_input_signature.items()})
    # the same two reparameterised draws the loss made (next actions first, then current ones)
    tf.random.set_seed(11)
    next_outputs, _ = policy.model({SampleBatch.OBS: tf.constant(batch["new_obs"])})
    next_actions = policy_squashed(policy, next_outputs).sample_and_logp()[0].numpy()
    outputs, _ = policy.model({SampleBatch.OBS: tf.constant(batch["obs"])})
    actions = policy_squashed(policy, outputs).sample_and_logp()[0].numpy()

    alpha = 0.3
    next_out, out = new_obs @ wa + ba, obs @ wa + ba
    next_logp = hand_logp(next_actions, next_out[:, :2], next_out[:, 2:])
    logp = hand_logp(actions, out[:, :2], out[:, 2:])

    def normalized(a):
        return (np.asarray(a, np.float64) - LOW) / HALF_RANGE - 1

    q_next = [np.concatenate([new_obs, normalized(next_actions)], 1) @ wq_t[i] + bq_t[i]
              for i in range(2)]
    target = batch["rewards"] + 0.9 ** batch["n_steps"] * (1 - batch["terminateds"]) * (
        np.minimum(*q_next) - alpha * next_logp)
    q = [np.concatenate([obs, normalized(batch["actions"])], 1) @ wq[i] + bq[i] for i in range(2)]
    critic = 0.5 * sum(np.mean(batch["weights"] * (q[i] - target) ** 2) for i in range(2))
    q_pi = [np.concatenate([obs, normalized(actions)], 1) @ wq[i] + bq[i] for i in range(2)]
    actor = np.mean(alpha * logp - np.minimum(*q_pi))
    alpha_loss = -np.log(alpha) * np.mean(logp - 1.5)

    np.testing.assert_allclose(float(stats["critic_loss"]), critic, rtol=1e-4)
    np.testing.assert_allclose(float(stats["actor_loss"]), actor, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(stats["alpha_loss"]), alpha_loss, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(stats["alpha_value"]), alpha, rtol=1e-6)
    np.testing.assert_allclose(float(loss), critic + actor + alpha_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(per_sample["td_error"].numpy(),
                               0.5 * (np.abs(q[0] - target) + np.abs(q[1] - target)),
                               rtol=1e-4, atol=1e-5)


def policy_squashed(policy, outputs):
    return SquashedGaussian(outputs, low=policy.low, high=policy.high)


@pytest.mark.parametrize("target_entropy,direction", [(5.0, 1), (-20.0, -1)])
def test_entropy_tuning_moves_alpha_towards_the_target_entropy(target_entropy, direction):
    # target above the policy's entropy: alpha must grow (more entropy bonus); below: shrink
    rng = np.random.default_rng(1)
    policy = sac_policy(target_entropy=target_entropy, initial_alpha=0.5)
    batch = make_batch(rng, n=32)
    alphas = [float(np.exp(policy.model.log_alpha.numpy()))]
    for _ in range(3):
        stats = policy.learn_on_batch(batch)
        alphas.append(float(np.exp(policy.model.log_alpha.numpy())))
    assert stats["entropy"] < target_entropy if direction > 0 else stats["entropy"] > target_entropy
    assert all(direction * (b - a) > 0 for a, b in zip(alphas, alphas[1:])), alphas


def test_target_critics_move_by_polyak_tau_and_the_target_actor_stays():
    rng = np.random.default_rng(2)
    policy = sac_policy(tau=0.1)
    target_before = [v.numpy() for v in policy.target_model.variables]
    policy.learn_on_batch(make_batch(rng))
    pairs = list(zip(target_before, policy.target_model.variables, policy.model.variables))
    critic_ids = {id(v) for v in policy.target_model.critic_variables()}
    for before, target, source in pairs:
        if id(target) in critic_ids:
            np.testing.assert_allclose(target.numpy(), 0.1 * source.numpy() + 0.9 * before,
                                       rtol=1e-5, atol=1e-6)
        else:  # the target actor and log_alpha are not used and not moved
            np.testing.assert_array_equal(target.numpy(), before)


def test_actions_stay_within_bounds_and_explore_false_takes_the_mode():
    policy = sac_policy(exploration_config={"random_timesteps": 0})
    set_linear(policy.model.actor, np.full((8, 4), 4.0), np.zeros(4))  # wide, saturating
    obs = np.random.default_rng(3).normal(scale=3.0, size=(512, 2)).astype(np.float32)
    sampled = policy.compute_actions(obs)[0]
    assert np.all(sampled >= ACTION_SPACE.low) and np.all(sampled <= ACTION_SPACE.high)
    mode = policy.compute_actions(obs, explore=False)[0]
    np.testing.assert_array_equal(mode, policy.compute_actions(obs, explore=False)[0])
    assert np.all(mode >= ACTION_SPACE.low) and np.all(mode <= ACTION_SPACE.high)
    assert not np.allclose(sampled, mode)


def test_sac_acts_through_xla_by_default_with_the_graphs_actions():
    xla = sac_policy(exploration_config={"random_timesteps": 0})
    graph = sac_policy(exploration_config={"random_timesteps": 0}, jit_compile_actions=False)
    graph.set_weights(xla.get_weights())
    assert xla.actions_compiled_with_xla and not graph.actions_compiled_with_xla
    obs = np.random.default_rng(4).normal(scale=3.0, size=(64, 2)).astype(np.float32)
    np.testing.assert_allclose(xla.compute_actions(obs, explore=False)[0],
                               graph.compute_actions(obs, explore=False)[0], rtol=1e-5, atol=1e-5)
    sampled = xla.compute_actions(obs)[0]
    assert np.all(sampled >= ACTION_SPACE.low) and np.all(sampled <= ACTION_SPACE.high)
    assert not np.allclose(sampled, xla.compute_actions(obs, explore=False)[0])


def test_squashed_gaussian_sample_and_logp_is_exact_where_tanh_saturates():
    # u = 10: 1 - tanh(u)^2 is about 8e-9, below float32's resolution of 1 - tanh^2; the old
    # epsilon-guarded formula gave log(1e-6) there instead of about -18.7
    low, high = np.array([-2.0], np.float32), np.array([2.0], np.float32)
    inputs = tf.Variable([[10.0, -20.0], [0.3, -1.0]])
    with tf.GradientTape() as tape:
        actions, logp = SquashedGaussian(inputs, low=low, high=high).sample_and_logp(
            seed=tf.constant([1, 2]))
        total = tf.reduce_sum(logp) + tf.reduce_sum(actions)
    grads = tape.gradient(total, inputs).numpy()
    assert np.all(np.isfinite(grads)) and np.all(grads[:, 0] != 0)  # reparameterised
    # std e^-20: in float32 the draw 10 + 2e-9 * eps rounds to the mean, so the Gaussian term
    # is exactly -log(std) - log(2 pi) / 2
    u = 10.0
    log_det_saturated = 2 * (np.log(2) - u - np.log1p(np.exp(-2 * u))) + np.log(2.0)
    expected = 20.0 - 0.5 * np.log(2 * np.pi) - log_det_saturated
    np.testing.assert_allclose(float(logp[0]), expected, rtol=1e-5)
    # where nothing saturates, sample_and_logp agrees with logp of the returned action
    dist = SquashedGaussian(tf.constant([[0.3, -1.0]]), low=low, high=high)
    a, lp = dist.sample_and_logp(seed=tf.constant([3, 4]))
    np.testing.assert_allclose(lp.numpy(), dist.logp(a).numpy(), rtol=1e-4)


@pytest.mark.parametrize("key,value,match", [
    ("initial_alpha", 0.0, "initial_alpha"), ("target_entropy", "high", "target_entropy"),
    ("tau", 1.5, "tau"), ("optimization", {"actor_learning_rate": 0.0}, "actor_learning_rate"),
])
def test_bad_settings_are_refused(key, value, match):
    with pytest.raises(InvalidConfigError, match=match):
        validate_config(dict(DEFAULT_CONFIG, **{key: value}))
