"""Each policy mixin's effect on a real policy."""
import numpy as np
import pytest
import tensorflow as tf

from .policy_helpers import TINY_MODEL, ActorCriticPolicy, cartpole_spaces, random_fragment
from tfrl.errors import InvalidConfigError, NotSupportedError
from tfrl.policy import (ComputeTDErrorMixin, KLCoeffMixin, SampleBatch, TargetNetworkMixin,
                         build_tf_policy)

GAMMA = 0.9


def q_loss(policy, model, dist_class, batch):
    q_values, _ = model({"obs": batch[SampleBatch.OBS]})
    q_taken = tf.reduce_sum(q_values * tf.one_hot(batch[SampleBatch.ACTIONS], 2), axis=-1)
    q_next, _ = policy.target_model({"obs": batch[SampleBatch.NEXT_OBS]})
    not_done = 1.0 - tf.cast(batch[SampleBatch.TERMINATEDS], tf.float32)
    target = batch[SampleBatch.REWARDS] + GAMMA * not_done * tf.reduce_max(q_next, axis=-1)
    policy.td_error = q_taken - tf.stop_gradient(target)
    return tf.reduce_mean(batch[SampleBatch.PRIO_WEIGHTS] * tf.square(policy.td_error))


QPolicy = build_tf_policy(
    "QPolicy", loss_fn=q_loss,
    get_default_config=lambda: {"model": TINY_MODEL, "tau": 0.5, "lr": 0.05},
    extra_learn_fetches_fn=lambda policy: {"td_error": policy.td_error},
    mixins=[TargetNetworkMixin, ComputeTDErrorMixin])


def _q(model, obs):
    return model({"obs": tf.constant(obs)})[0].numpy()


def _weights(vs):
    return [v.numpy() for v in vs]


def test_lr_schedule_changes_optimizer_lr_with_timestep():
    obs_space, act_space = cartpole_spaces()
    policy = ActorCriticPolicy(obs_space, act_space, {
        "lr": 0.1, "lr_schedule": [[0, 1e-2], [1000, 1e-3]]})
    assert policy.optimizer.learning_rate.numpy() == pytest.approx(1e-2)
    policy.on_global_var_update({"timestep": 500})
    assert policy.optimizer.learning_rate.numpy() == pytest.approx(5.5e-3)
    assert policy.cur_lr == pytest.approx(5.5e-3)
    policy.on_global_var_update({"timestep": 5000})
    assert policy.optimizer.learning_rate.numpy() == pytest.approx(1e-3)
    assert policy.global_timestep == 5000
    with pytest.raises(InvalidConfigError):
        ActorCriticPolicy(obs_space, act_space, {"lr_schedule": [[10, 1.0], [5, 2.0]]})


def test_entropy_coeff_schedule_reaches_the_loss():
    obs_space, act_space = cartpole_spaces()
    policy = ActorCriticPolicy(obs_space, act_space, {
        "seed": 0, "entropy_coeff_schedule": [[0, 0.0], [100, 1.0]]})
    batch = policy._prepare_batch(policy.postprocess_trajectory(random_fragment(8)))
    tensors = {k: tf.constant(v) for k, v in batch.items()}
    loss0, stats0, _ = policy._loss_fn(tensors)
    policy.on_global_var_update({"timestep": 50})
    assert policy.entropy_coeff.numpy() == pytest.approx(0.5)
    loss50, stats50, _ = policy._loss_fn(tensors)
    np.testing.assert_allclose(float(loss0) - float(loss50), 0.5 * float(stats0["entropy"]),
                               rtol=1e-5)
    assert policy._loss_fn.experimental_get_tracing_count() == 1  # no retrace on a new coeff


def test_kl_coeff_update_rule():
    obs_space, act_space = cartpole_spaces()
    KLPolicy = ActorCriticPolicy.with_updates(name="KLPolicy", mixins=[
        KLCoeffMixin, *ActorCriticPolicy._build_kwargs["mixins"]])
    policy = KLPolicy(obs_space, act_space, {"kl_coeff": 0.2, "kl_target": 0.01})
    assert policy.update_kl(0.05) == pytest.approx(0.3)   # > 2 x target: x1.5
    assert policy.update_kl(0.001) == pytest.approx(0.15)  # < target / 2: x0.5
    assert policy.update_kl(0.012) == pytest.approx(0.15)  # in band: unchanged
    assert policy.kl_coeff.numpy() == pytest.approx(0.15)
    assert policy.get_state()["extra"]["kl_coeff"][0] == pytest.approx(0.15)


def test_value_network_mixin_matches_vf_preds(ac_policy):
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    _, _, extras = ac_policy.compute_actions(obs)
    # two traced graphs of the same network: float32 rounding may differ by a few ulps
    np.testing.assert_allclose(ac_policy.value(obs), extras[SampleBatch.VF_PREDS],
                               rtol=1e-5, atol=1e-6)
    assert ac_policy._value(obs).shape == (5,)


def _q_batch(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return SampleBatch({
        SampleBatch.OBS: rng.normal(size=(n, 4)).astype(np.float32),
        SampleBatch.NEXT_OBS: rng.normal(size=(n, 4)).astype(np.float32),
        SampleBatch.ACTIONS: rng.integers(0, 2, n),
        SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
        SampleBatch.TERMINATEDS: np.arange(n) % 3 == 0,
        SampleBatch.PRIO_WEIGHTS: np.ones(n, np.float32)})


def test_target_network_hard_copy_then_polyak():
    obs_space, act_space = cartpole_spaces()
    policy = QPolicy(obs_space, act_space, {"seed": 0})
    for t, m in zip(_weights(policy.target_model.variables), policy.get_weights()):
        np.testing.assert_array_equal(t, m)  # synced at construction
    old_target = _weights(policy.target_model.variables)
    for _ in range(3):
        policy.learn_on_batch(_q_batch())
    model_w = policy.get_weights()
    for t, o in zip(_weights(policy.target_model.variables), old_target):
        np.testing.assert_array_equal(t, o)  # learning does not touch the target
    assert any(not np.allclose(m, o) for m, o in zip(model_w, old_target))
    policy.update_target()  # config tau = 0.5
    for t, m, o in zip(_weights(policy.target_model.variables), model_w, old_target):
        np.testing.assert_allclose(t, 0.5 * m + 0.5 * o, rtol=1e-5, atol=1e-7)
    policy.update_target(tau=1.0)
    for t, m in zip(_weights(policy.target_model.variables), model_w):
        np.testing.assert_allclose(t, m, rtol=1e-6)
    with pytest.raises(InvalidConfigError):
        policy.update_target(tau=1.5)


def test_compute_td_error_matches_hand_computation():
    obs_space, act_space = cartpole_spaces()
    policy = QPolicy(obs_space, act_space, {"seed": 0})
    policy.learn_on_batch(_q_batch(seed=1))  # make model and target differ
    b = _q_batch(seed=2)
    td = policy.compute_td_error(b["obs"], b["actions"], b["rewards"], b["new_obs"],
                                 b["terminateds"])
    q = _q(policy.model, b["obs"])[np.arange(6), b["actions"]]
    q_next = _q(policy.target_model, b["new_obs"]).max(-1)
    expected = q - (b["rewards"] + GAMMA * (1 - b["terminateds"]) * q_next)
    np.testing.assert_allclose(td, expected, rtol=1e-5, atol=1e-6)
    stats = policy.learn_on_batch(b)
    assert stats["td_error"].shape == (6,)


def test_compute_td_error_needs_the_loss_to_expose_it():
    obs_space, act_space = cartpole_spaces()
    NoTD = QPolicy.with_updates(name="NoTD", extra_learn_fetches_fn=None)
    policy = NoTD(obs_space, act_space, {})
    b = _q_batch()
    with pytest.raises(NotSupportedError, match="td_error"):
        policy.compute_td_error(b["obs"], b["actions"], b["rewards"], b["new_obs"],
                                b["terminateds"])


def test_a_mixin_whose_key_the_policy_config_lacks_is_a_named_error_not_a_default():
    obs_space, act_space = cartpole_spaces()
    KLPolicy = ActorCriticPolicy.with_updates(name="KLPolicy", mixins=[
        KLCoeffMixin, *ActorCriticPolicy._build_kwargs["mixins"]])
    with pytest.raises(InvalidConfigError, match="'kl_target' is missing"):
        KLPolicy(obs_space, act_space, {"kl_coeff": 0.2})
    with pytest.raises(InvalidConfigError, match="'kl_target' must be > 0"):
        KLPolicy(obs_space, act_space, {"kl_coeff": 0.2, "kl_target": 0.0})
    NoTau = QPolicy.with_updates(name="NoTau", get_default_config=lambda: {"model": TINY_MODEL})
    with pytest.raises(InvalidConfigError, match="'tau' is missing"):
        NoTau(obs_space, act_space, {})
