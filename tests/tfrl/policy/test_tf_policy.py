"""TFPolicy built with build_tf_policy: acting, tracing, learning, weights, state, checkpoints."""
import pickle

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from .policy_helpers import (TINY_MODEL, ActorCriticPolicy, actor_critic_loss, cartpole_spaces,
                            random_fragment)
from tfrl.errors import CheckpointError, InvalidBatchError, InvalidConfigError
from tfrl.policy import SampleBatch, build_tf_policy


def _train_batch(policy, n=16, seed=0):
    return policy.postprocess_trajectory(random_fragment(n=n, seed=seed))


def test_compute_actions_returns_actions_logp_dist_inputs_and_values(ac_policy):
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    actions, state_out, extras = ac_policy.compute_actions(obs)
    assert actions.shape == (6,) and set(np.unique(actions)) <= {0, 1}
    assert state_out == []
    logits = extras[SampleBatch.ACTION_DIST_INPUTS]
    assert logits.shape == (6, 2)
    expected_logp = logits[np.arange(6), actions] - np.log(np.exp(logits).sum(-1))
    np.testing.assert_allclose(extras[SampleBatch.ACTION_LOGP], expected_logp, rtol=1e-5)
    # two traced graphs of the same network: float32 rounding may differ by a few ulps
    np.testing.assert_allclose(extras[SampleBatch.VF_PREDS], ac_policy.compute_values(obs),
                               rtol=1e-5, atol=1e-6)
    greedy, _, _ = ac_policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(greedy, logits.argmax(-1))


def test_single_action_and_global_timestep(ac_policy):
    action, state, extras = ac_policy.compute_single_action(np.zeros(4, np.float32))
    assert np.ndim(action) == 0 and state == [] and np.ndim(extras["action_logp"]) == 0
    ac_policy.compute_actions(np.zeros((5, 4), np.float32))
    assert ac_policy.global_timestep == 6


def test_changing_batch_sizes_does_not_retrace(ac_policy):
    for n in (1, 3, 7, 20):
        ac_policy.compute_actions(np.zeros((n, 4), np.float32), explore=n % 2 == 0)
    assert ac_policy._compute_actions_fn.experimental_get_tracing_count() == 1
    for n in (5, 9, 16):
        ac_policy.learn_on_batch(_train_batch(ac_policy, n=n, seed=n))
    assert ac_policy._learn_fn.experimental_get_tracing_count() == 1


def test_learn_signature_is_the_columns_the_loss_reads(ac_policy):
    assert set(ac_policy.loss_input_signature) == {
        SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS}


def test_learn_on_batch_reduces_loss_on_a_fixed_batch(ac_policy):
    batch = _train_batch(ac_policy)
    first = ac_policy.learn_on_batch(batch)
    for _ in range(30):
        last = ac_policy.learn_on_batch(batch)
    assert set(first) >= {"total_loss", "pi_loss", "vf_loss", "entropy", "grad_gnorm"}
    assert last["vf_loss"] < first["vf_loss"]
    assert ac_policy.num_grad_updates == 31


def test_missing_column_is_a_named_error(ac_policy):
    batch = _train_batch(ac_policy)
    del batch[SampleBatch.ADVANTAGES]
    with pytest.raises(InvalidBatchError, match="advantages"):
        ac_policy.learn_on_batch(batch)


def test_compute_then_apply_gradients_equals_learn_on_batch():
    obs_space, act_space = cartpole_spaces()
    a = ActorCriticPolicy(obs_space, act_space, {"seed": 0})
    b = ActorCriticPolicy(obs_space, act_space, {"seed": 0})
    b.set_weights(a.get_weights())
    batch = _train_batch(a)
    grads, stats = a.compute_gradients(batch)
    assert len(grads) == len(a.trainable_variables) and "total_loss" in stats
    a.apply_gradients(grads)
    b.learn_on_batch(batch)
    for x, y in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7)
    with pytest.raises(InvalidBatchError):
        a.apply_gradients(grads[:-1])


def test_weights_round_trip_and_are_picklable(ac_policy):
    obs_space, act_space = cartpole_spaces()
    other = ActorCriticPolicy(obs_space, act_space, {"seed": 5})
    obs = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    weights = pickle.loads(pickle.dumps(ac_policy.get_weights()))
    assert all(isinstance(w, np.ndarray) for w in weights)
    other.set_weights(weights)
    np.testing.assert_allclose(other.compute_values(obs), ac_policy.compute_values(obs))
    with pytest.raises(CheckpointError):
        other.set_weights(weights[:-1])


def test_state_round_trip_includes_optimizer_slots_and_counters(tmp_path):
    obs_space, act_space = cartpole_spaces()
    a = ActorCriticPolicy(obs_space, act_space, {"seed": 0})
    batch = _train_batch(a)
    for _ in range(3):
        a.learn_on_batch(batch)
    a.on_global_var_update({"timestep": 123})
    b = ActorCriticPolicy(obs_space, act_space, {"seed": 9})
    b.set_state(a.get_state())
    assert b.global_timestep == 123 and b.num_grad_updates == 3
    for x, y in zip(a.optimizer.variables, b.optimizer.variables):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    # with identical slots (Adam moments, step), the next steps stay identical
    a.learn_on_batch(batch)
    b.learn_on_batch(batch)
    for x, y in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)

    a.export_checkpoint(str(tmp_path / "ckpt"))
    c = ActorCriticPolicy(obs_space, act_space, {"seed": 4})
    c.import_checkpoint(str(tmp_path / "ckpt"))
    for x, y in zip(a.get_weights() + [v.numpy() for v in a.optimizer.variables],
                    c.get_weights() + [v.numpy() for v in c.optimizer.variables]):
        np.testing.assert_array_equal(x, y)
    assert c.num_grad_updates == a.num_grad_updates


def test_bad_state_and_missing_checkpoint_change_nothing(tmp_path):
    obs_space, act_space = cartpole_spaces()
    small = ActorCriticPolicy(obs_space, act_space, {"seed": 0})
    big = ActorCriticPolicy(obs_space, act_space, {"seed": 0, "model": {"fcnet_hiddens": [16]}})
    before = small.get_weights()
    with pytest.raises(CheckpointError, match="shape"):
        small.set_state(big.get_state())
    for x, y in zip(before, small.get_weights()):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(CheckpointError, match="export_checkpoint"):
        small.import_checkpoint(str(tmp_path / "nothing-here"))


def test_with_updates_overrides_one_hook_and_keeps_the_rest():
    obs_space, act_space = cartpole_spaces()
    Variant = ActorCriticPolicy.with_updates(
        name="Variant", stats_fn=lambda policy, batch: {"double_vf": 2.0 * policy.vf_loss})
    assert Variant.__name__ == "Variant" and Variant is not ActorCriticPolicy
    policy = Variant(obs_space, act_space, {"seed": 0})
    stats = policy.learn_on_batch(_train_batch(policy))
    assert "double_vf" in stats and "pi_loss" not in stats
    assert policy.config["lambda"] == 0.95  # default config kept
    assert hasattr(policy, "entropy_coeff")  # mixins kept
    with pytest.raises(InvalidConfigError):
        ActorCriticPolicy.with_updates(no_such_hook=None)


def test_hooks_run_in_documented_order():
    calls = []

    def hook(tag):
        def fn(policy, *args):
            calls.append((tag, hasattr(policy, "model"), hasattr(policy, "_learn_signature")))
        return fn

    obs_space, act_space = cartpole_spaces()
    Traced = ActorCriticPolicy.with_updates(
        validate_spaces=hook("validate"), before_init=hook("before_init"),
        before_loss_init=hook("before_loss_init"), after_init=hook("after_init"),
        get_batch_divisibility_req=lambda policy: 4)
    policy = Traced(obs_space, act_space, {})
    assert calls == [("validate", False, False), ("before_init", False, False),
                     ("before_loss_init", True, False), ("after_init", True, True)]
    assert policy.batch_divisibility_req == 4


def test_extra_action_out_and_action_sampler_hooks():
    obs_space, act_space = cartpole_spaces()

    def always_one(policy, model, obs, states, explore, timestep, seed):
        n = tf.shape(obs)[0]
        model({"obs": obs}, states, None)
        return tf.ones([n], tf.int64), tf.zeros([n]), states

    Sampler = ActorCriticPolicy.with_updates(
        action_sampler_fn=always_one,
        extra_action_out_fn=lambda policy, input_dict, states, model, dist: {
            "obs_sum": tf.reduce_sum(input_dict["obs"], axis=-1)})
    policy = Sampler(obs_space, act_space, {})
    obs = np.arange(8, dtype=np.float32).reshape(2, 4)
    actions, _, extras = policy.compute_actions(obs)
    np.testing.assert_array_equal(actions, [1, 1])
    np.testing.assert_allclose(extras["obs_sum"], [6.0, 22.0])
    assert SampleBatch.ACTION_DIST_INPUTS not in extras


def test_recurrent_policy_carries_state_and_learns_on_padded_sequences():
    obs_space, act_space = cartpole_spaces()
    policy = ActorCriticPolicy(obs_space, act_space, {
        "seed": 0, "model": dict(TINY_MODEL, use_lstm=True, lstm_cell_size=4, max_seq_len=5)})
    assert policy.is_recurrent() and len(policy.get_initial_state()) == 2
    obs = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    _, state1, _ = policy.compute_actions(obs)
    _, state2, _ = policy.compute_actions(obs, state1)
    assert not np.allclose(state1[0], state2[0])
    batch = random_fragment(n=12)
    states = [np.zeros((12, 4), np.float32)] * 2
    batch[SampleBatch.state_in(0)], batch[SampleBatch.state_in(1)] = states
    batch = policy.postprocess_trajectory(batch)
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["total_loss"])
    assert SampleBatch.SEQ_LENS in policy.loss_input_signature


@pytest.mark.parametrize("obs_space, act_space", [
    (gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Box(-1, 1, (2,))}),
     gym.spaces.MultiDiscrete([2, 3])),
    (gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (3,)))),
     gym.spaces.Box(-2.0, 2.0, (2,), np.float32)),
])
def test_nested_observations_and_other_action_spaces(obs_space, act_space):
    policy = ActorCriticPolicy(obs_space, act_space, {"seed": 0})
    raw = [obs_space.sample() for _ in range(4)]
    actions, _, extras = policy.compute_actions(raw)
    assert actions.shape == (4, 2) and extras["action_logp"].shape == (4,)
    if isinstance(act_space, gym.spaces.MultiDiscrete):
        assert all(act_space.contains(a.astype(act_space.dtype)) for a in actions)
    greedy, _, extras = policy.compute_actions(raw, explore=False)
    dist = policy.dist_class(tf.constant(extras["action_dist_inputs"]))
    np.testing.assert_allclose(greedy, dist.deterministic_sample().numpy())


def test_build_tf_policy_rejects_bad_hooks():
    with pytest.raises(InvalidConfigError):
        build_tf_policy("Bad", loss_fn=None)
    with pytest.raises(InvalidConfigError):
        build_tf_policy("Bad", loss_fn=actor_critic_loss, stats_fn="not callable")


def test_extra_action_fetches_fn_is_rllibs_name_of_extra_action_out_fn():
    """RLlib's classic `extra_action_fetches_fn(policy)` returns tensors the action hooks stored
    on the policy; tfrl traces it where it traces extra_action_out_fn."""
    obs_space, act_space = cartpole_spaces()

    def greedy_on_logits(policy, model, obs, states, explore, timestep, seed):
        logits, state_out = model({"obs": obs}, states, None)
        policy.action_logits = logits  # what the fetches hook reads
        return tf.argmax(logits, axis=-1), None, state_out

    Fetching = ActorCriticPolicy.with_updates(
        action_sampler_fn=greedy_on_logits,
        extra_action_fetches_fn=lambda policy: {"max_logit": tf.reduce_max(policy.action_logits, -1)})
    policy = Fetching(obs_space, act_space, {"seed": 0})
    obs = np.arange(8, dtype=np.float32).reshape(2, 4)
    actions, _, extras = policy.compute_actions(obs)
    logits, _ = policy.model({"obs": tf.constant(obs)}, [], None)
    np.testing.assert_allclose(extras["max_logit"], np.max(logits.numpy(), -1), rtol=1e-5)
    np.testing.assert_array_equal(actions, np.argmax(logits.numpy(), -1))

    # the newer name replaces the older one in with_updates; both at once is an error
    Replaced = Fetching.with_updates(
        extra_action_out_fn=lambda policy, input_dict, states, model, dist: {
            "obs_sum": tf.reduce_sum(input_dict["obs"], axis=-1)})
    _, _, extras = Replaced(obs_space, act_space, {"seed": 0}).compute_actions(obs)
    assert "obs_sum" in extras and "max_logit" not in extras
    with pytest.raises(InvalidConfigError, match="extra_action_fetches_fn is another name"):
        build_tf_policy("Both", loss_fn=actor_critic_loss,
                        extra_action_out_fn=lambda *a: {}, extra_action_fetches_fn=lambda p: {})


@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
def test_outputs_of_chosen_actions_are_those_compute_actions_gives_in_one_call(env_name):
    """compute_outputs_of_actions: the extra outputs compute_actions gives for the same
    observations, with the likelihoods of the given actions, in the policy's action dtype."""
    from tfrl.agents.ppo import DEFAULT_CONFIG, PPOTFPolicy
    from tests.tfrl.agents.agent_helpers import trainer_config

    env = gym.make(env_name)
    policy = PPOTFPolicy(env.observation_space, env.action_space,
                         trainer_config(DEFAULT_CONFIG, seed=4, model={"fcnet_hiddens": [8]}))
    env.action_space.seed(2)
    env.observation_space.seed(2)
    obs = np.stack([env.observation_space.sample() for _ in range(6)]).astype(np.float32)
    chosen = np.array([env.action_space.sample() for _ in range(6)], np.float64)  # not the
    # policy's own dtype
    own, _, expected = policy.compute_actions(obs, explore=False)
    before = policy.global_timestep
    actions, extra = policy.compute_outputs_of_actions(obs, chosen, explore=False)
    assert policy.global_timestep == before + 6
    assert actions.dtype == own.dtype and actions.shape == own.shape
    np.testing.assert_allclose(actions, chosen.astype(own.dtype))
    assert set(extra) == set(expected)
    for key in (SampleBatch.VF_PREDS, SampleBatch.ACTION_DIST_INPUTS):
        np.testing.assert_allclose(extra[key], expected[key], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(extra[SampleBatch.ACTION_LOGP],
                               policy.compute_log_likelihoods(actions, obs), rtol=1e-5, atol=1e-6)


def test_a_policy_without_action_likelihoods_falls_back_to_compute_actions():
    from tfrl.agents.dqn import DEFAULT_CONFIG, DQNTFPolicy
    from tfrl.errors import NotSupportedError
    from tfrl.rollout.trajectory import outputs_of_chosen_actions
    from tests.tfrl.agents.agent_helpers import trainer_config

    obs_space, act_space = cartpole_spaces()
    policy = DQNTFPolicy(obs_space, act_space, trainer_config(DEFAULT_CONFIG, seed=1))
    obs = np.zeros((3, 4), np.float32)
    with pytest.raises(NotSupportedError, match="without a distribution"):
        policy.compute_outputs_of_actions(obs, np.array([0, 1, 1]))
    actions, extra = outputs_of_chosen_actions(policy, obs, np.array([0, 1, 1]), True, None)
    assert actions.tolist() == [0, 1, 1]
    _, _, own_extra = policy.compute_actions(obs)
    assert set(extra) == set(own_extra)


def test_a_policy_without_defaults_of_its_own_has_the_trainers_common_values():
    """A policy declared without get_default_config, built outside a trainer, acts and learns
    with COMMON_CONFIG's values, as it does inside a trainer that leaves them unset (it once
    learned at 5e-4 alone and at COMMON_CONFIG's 1e-4 in a trainer)."""
    from tfrl.config import COMMON_CONFIG

    Bare = build_tf_policy("Bare", loss_fn=lambda policy, model, dist_class, batch: tf.reduce_mean(
        model.from_batch(batch)[0]))
    policy = Bare(*cartpole_spaces(), {"model": TINY_MODEL})
    for key in ("lr", "gamma", "explore", "clip_actions", "seed"):
        assert policy.config[key] == COMMON_CONFIG[key], key
    assert float(policy.optimizer.learning_rate.numpy()) == pytest.approx(COMMON_CONFIG["lr"])
    assert policy.config["grad_clip"] is None
