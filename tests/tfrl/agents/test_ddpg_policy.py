"""DDPG/TD3 policy: losses against hand-computed linear networks, separate actor/critic
gradients, delayed policy updates, polyak target updates, exploration and action bounds."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.ddpg import DEFAULT_CONFIG, TD3_CONFIG, DDPGTFPolicy
from tfrl.agents.ddpg.ddpg import validate_config
from tfrl.errors import InvalidConfigError, UnsupportedSpaceError
from tfrl.policy import SampleBatch

from tests.tfrl.agents.agent_helpers import trainer_config

OBS_SPACE = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
# asymmetric bounds: scaling mistakes show up as actions outside them
ACTION_SPACE = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([3.0, 0.5], np.float32))
LOW, HIGH = ACTION_SPACE.low.astype(np.float64), ACTION_SPACE.high.astype(np.float64)


def linear_td3(**overrides):
    """A TD3 policy whose actor and critics are single linear layers (no hidden layers)."""
    config = trainer_config(TD3_CONFIG, actor_hiddens=[], critic_hiddens=[],
                            smooth_target_policy=False, **overrides)
    return DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, config)


def set_linear(stack, kernel, bias):
    layer = stack.layers[-1]
    layer.kernel.assign(np.asarray(kernel, np.float32).reshape(layer.kernel.shape))
    layer.bias.assign(np.asarray(bias, np.float32).reshape(layer.bias.shape))


def make_batch(rng, n=6):
    obs = rng.normal(size=(n, 2)).astype(np.float32)
    new_obs = rng.normal(size=(n, 2)).astype(np.float32)
    actions = rng.uniform(LOW, HIGH, size=(n, 2)).astype(np.float32)
    return SampleBatch({
        SampleBatch.OBS: obs, SampleBatch.NEXT_OBS: new_obs, SampleBatch.ACTIONS: actions,
        SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
        SampleBatch.TERMINATEDS: np.array([False, True] * (n // 2)),
        SampleBatch.N_STEPS: np.array([1, 2] * (n // 2), np.int64),
        SampleBatch.PRIO_WEIGHTS: rng.uniform(0.5, 1.0, size=n).astype(np.float32)})


def loss_parts(policy, batch):
    tensors = {k: tf.constant(batch[k], spec.dtype)
               for k, spec in policy.loss_input_signature.items()}
    loss, stats, per_sample = policy.loss_and_stats(tensors)
    return float(loss), {k: float(v) for k, v in stats.items()}, per_sample["td_error"].numpy()


def test_td3_losses_match_a_hand_computed_linear_case():
    rng = np.random.default_rng(0)
    policy = linear_td3(gamma=0.9)
    wa, ba = rng.normal(size=(2, 2)), rng.normal(size=2)
    wq = [rng.normal(size=4), rng.normal(size=4)]
    bq = [0.3, -0.2]
    wa_t, ba_t = rng.normal(size=(2, 2)), rng.normal(size=2)
    wq_t = [rng.normal(size=4), rng.normal(size=4)]
    bq_t = [0.1, 0.5]
    set_linear(policy.model.actor, wa, ba)
    set_linear(policy.target_model.actor, wa_t, ba_t)
    for i in range(2):
        set_linear(policy.model.critics[i], wq[i], bq[i])
        set_linear(policy.target_model.critics[i], wq_t[i], bq_t[i])
    batch = make_batch(rng)
    obs, new_obs = batch["obs"].astype(np.float64), batch["new_obs"].astype(np.float64)
    normalized = 2 * (batch["actions"] - LOW) / (HIGH - LOW) - 1

    next_action = np.tanh(new_obs @ wa_t + ba_t)  # normalised, no smoothing noise
    q_next = [np.concatenate([new_obs, next_action], 1) @ wq_t[i] + bq_t[i] for i in range(2)]
    target = batch["rewards"] + 0.9 ** batch["n_steps"] * (1 - batch["terminateds"]) * np.minimum(
        *q_next)
    q = [np.concatenate([obs, normalized], 1) @ wq[i] + bq[i] for i in range(2)]
    weights = batch["weights"]
    critic = sum(np.mean(weights * (q[i] - target) ** 2) for i in range(2))
    actor = -np.mean(np.concatenate([obs, np.tanh(obs @ wa + ba)], 1) @ wq[0] + bq[0])

    # policy_delay 2: the first step (critic update 1) leaves the actor out of the loss, its
    # statistic NaN and its gradient zero
    loss, stats, _ = loss_parts(policy, batch)
    np.testing.assert_allclose(loss, critic, rtol=1e-4)
    assert np.isnan(stats["actor_loss"])
    grads, _ = policy.compute_gradients(batch)
    assert all(not np.any(g) for g in grads[:len(policy.model.actor_variables())])

    policy.critic_optimizer.iterations.assign(1)  # the second step updates the actor
    loss, stats, td_error = loss_parts(policy, batch)
    np.testing.assert_allclose(stats["critic_loss"], critic, rtol=1e-4)
    np.testing.assert_allclose(stats["actor_loss"], actor, rtol=1e-4)
    np.testing.assert_allclose(loss, critic + actor, rtol=1e-4)
    np.testing.assert_allclose(td_error, 0.5 * (np.abs(q[0] - target) + np.abs(q[1] - target)),
                               rtol=1e-4, atol=1e-5)

    # each network's gradient is the gradient of its own loss only: the critic's does not see
    # the actor's term, the actor's goes through the (frozen) critic's action input
    grads, _ = policy.compute_gradients(batch)
    variables = policy.model.actor_variables() + policy.model.critic_variables()
    by_name = dict(zip([v.name for v in variables], grads))
    x = np.concatenate([obs, normalized], 1)
    for i in range(2):
        expected = 2 * np.mean((weights * (q[i] - target))[:, None] * x, axis=0)
        kernel = policy.model.critics[i].layers[-1].kernel
        np.testing.assert_allclose(by_name[kernel.name].reshape(-1), expected, rtol=1e-4,
                                   atol=1e-6)
    pre = obs @ wa + ba
    dq_da = wq[0][2:] * (1 - np.tanh(pre) ** 2)  # [B, 2]
    expected_actor = -(obs[:, :, None] * dq_da[:, None, :]).mean(axis=0)
    actor_kernel = policy.model.actor.layers[-1].kernel
    np.testing.assert_allclose(by_name[actor_kernel.name], expected_actor, rtol=1e-4, atol=1e-6)


def test_target_policy_smoothing_keeps_target_actions_in_bounds_and_changes_targets():
    rng = np.random.default_rng(1)
    smooth = DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
        TD3_CONFIG, actor_hiddens=[8], critic_hiddens=[8], target_noise=0.2,
        target_noise_clip=0.5))
    batch = make_batch(rng, n=64)
    losses = {loss_parts(smooth, batch)[1]["critic_loss"] for _ in range(3)}
    assert len(losses) == 3, "target policy smoothing should draw new noise every step"


def test_delayed_policy_updates_and_polyak_targets():
    rng = np.random.default_rng(2)
    policy = linear_td3(policy_delay=2, tau=0.25)
    batch = make_batch(rng)
    actor_before = [v.numpy() for v in policy.model.actor_variables()]
    target_before = [v.numpy() for v in policy.target_model.variables]

    policy.learn_on_batch(batch)  # critic update 1: no actor or target update
    assert all(np.array_equal(b, v.numpy())
               for b, v in zip(actor_before, policy.model.actor_variables()))
    assert all(np.array_equal(b, v.numpy())
               for b, v in zip(target_before, policy.target_model.variables))
    assert int(policy.critic_optimizer.iterations) == 1
    assert int(policy.actor_optimizer.iterations) == 0

    policy.learn_on_batch(batch)  # critic update 2: actor and targets move
    assert int(policy.actor_optimizer.iterations) == 1
    assert any(not np.array_equal(b, v.numpy())
               for b, v in zip(actor_before, policy.model.actor_variables()))
    # the target copy's variables pair up with the online ones by position
    for before, target, source in zip(target_before, policy.target_model.variables,
                                      policy.model.variables):
        np.testing.assert_allclose(target.numpy(), 0.25 * source.numpy() + 0.75 * before,
                                   rtol=1e-5, atol=1e-6)


def test_delay_and_optimizer_state_survive_get_state():
    rng = np.random.default_rng(3)
    policy = linear_td3(policy_delay=2)
    batch = make_batch(rng)
    policy.learn_on_batch(batch)
    state = policy.get_state()
    fresh = linear_td3(policy_delay=2)
    fresh.set_state(state)
    assert int(fresh.critic_optimizer.iterations) == 1
    actor_before = [v.numpy() for v in fresh.model.actor_variables()]
    fresh.learn_on_batch(batch)  # the restored counter makes this the delayed actor update
    assert int(fresh.actor_optimizer.iterations) == 1
    assert any(not np.array_equal(b, v.numpy())
               for b, v in zip(actor_before, fresh.model.actor_variables()))


@pytest.mark.parametrize("noise", ["GaussianNoise", "OrnsteinUhlenbeckNoise"])
def test_exploring_actions_stay_within_bounds_and_explore_false_is_deterministic(noise):
    exploration = dict(DEFAULT_CONFIG["exploration_config"], type=noise, random_timesteps=0,
                       stddev=3.0, ou_sigma=3.0, ou_base_scale=1.0)
    policy = DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
        DEFAULT_CONFIG, actor_hiddens=[8], critic_hiddens=[8], exploration_config=exploration))
    set_linear(policy.model.actor, np.full((8, 2), 5.0), np.zeros(2))  # saturating actor
    obs = np.random.default_rng(4).normal(scale=3.0, size=(256, 2)).astype(np.float32)
    explored = np.concatenate([policy.compute_actions(obs)[0] for _ in range(4)])
    assert np.all(explored >= ACTION_SPACE.low) and np.all(explored <= ACTION_SPACE.high)
    greedy = policy.compute_actions(obs, explore=False)[0]
    np.testing.assert_array_equal(greedy, policy.compute_actions(obs, explore=False)[0])
    assert not np.allclose(explored[:256], greedy), "exploration added no noise"
    assert np.all(greedy >= ACTION_SPACE.low) and np.all(greedy <= ACTION_SPACE.high)


def test_uniform_warmup_covers_the_bounds_then_stops():
    exploration = dict(TD3_CONFIG["exploration_config"], random_timesteps=100, stddev=0.0)
    policy = DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
        TD3_CONFIG, actor_hiddens=[8], critic_hiddens=[8], exploration_config=exploration))
    obs = np.zeros((500, 2), np.float32)
    warm = policy.compute_actions(obs, timestep=0)[0]
    assert np.all(warm >= ACTION_SPACE.low) and np.all(warm <= ACTION_SPACE.high)
    assert np.ptp(warm[:, 0]) > 3.0 and np.ptp(warm[:, 1]) > 0.4  # spread over the bounds
    after = policy.compute_actions(obs, timestep=100)[0]
    # the actor's own action for every row (a batched matmul may round its rows apart by an ulp;
    # uniform draws would differ by far more)
    np.testing.assert_allclose(after, np.repeat(after[:1], 500, 0), rtol=1e-6, atol=1e-6)


def test_unbounded_or_discrete_action_spaces_are_refused():
    config = trainer_config(TD3_CONFIG, actor_hiddens=[4], critic_hiddens=[4])
    with pytest.raises(UnsupportedSpaceError, match="Box"):
        DDPGTFPolicy(OBS_SPACE, gym.spaces.Discrete(3), config)
    with pytest.raises(UnsupportedSpaceError, match="unbounded"):
        DDPGTFPolicy(OBS_SPACE, gym.spaces.Box(-np.inf, np.inf, (2,)), config)


@pytest.mark.parametrize("key,value,match", [
    ("tau", 0.0, "tau"), ("policy_delay", 0, "policy_delay"), ("critic_loss", "l1", "critic_loss"),
    ("exploration_config", dict(TD3_CONFIG["exploration_config"], type="Uniform"), "type"),
])
def test_bad_settings_are_refused(key, value, match):
    with pytest.raises(InvalidConfigError, match=match):
        validate_config(dict(TD3_CONFIG, **{key: value}))


def test_noise_scale_follows_its_schedule_to_zero():
    exploration = dict(TD3_CONFIG["exploration_config"], random_timesteps=0, stddev=0.5,
                       initial_scale=1.0, final_scale=0.0, scale_timesteps=100)
    policy = DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
        TD3_CONFIG, actor_hiddens=[8], critic_hiddens=[8], exploration_config=exploration))
    obs = np.random.default_rng(5).normal(size=(64, 2)).astype(np.float32)
    greedy = policy.compute_actions(obs, explore=False)[0]
    assert not np.allclose(policy.compute_actions(obs, timestep=0)[0], greedy)
    policy.on_global_var_update({"timestep": 100})  # what workers get with the weights
    assert float(policy.noise_scale.numpy()) == 0.0
    np.testing.assert_allclose(policy.compute_actions(obs)[0], greedy, rtol=1e-6)


@pytest.mark.parametrize("config", [DEFAULT_CONFIG, TD3_CONFIG], ids=["ddpg", "td3"])
def test_ddpg_and_td3_act_through_xla_by_default_with_the_graphs_actions(config):
    exploration = dict(config["exploration_config"], random_timesteps=0)
    xla = DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
        config, actor_hiddens=[8], critic_hiddens=[8], exploration_config=exploration))
    graph = DDPGTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
        config, actor_hiddens=[8], critic_hiddens=[8], exploration_config=exploration,
        jit_compile_actions=False))
    graph.set_weights(xla.get_weights())
    assert xla.actions_compiled_with_xla and not graph.actions_compiled_with_xla
    obs = np.random.default_rng(5).normal(scale=3.0, size=(64, 2)).astype(np.float32)
    deterministic = xla.compute_actions(obs, explore=False)[0]
    np.testing.assert_allclose(deterministic, graph.compute_actions(obs, explore=False)[0],
                               rtol=1e-5, atol=1e-5)
    noisy = xla.compute_actions(obs)[0]
    assert np.all(noisy >= ACTION_SPACE.low) and np.all(noisy <= ACTION_SPACE.high)
    assert not np.allclose(noisy, deterministic)
