"""TFPolicy's hot paths call their concrete functions with flat tensors: same results as the
tf.function called with structured arguments, explore/timestep/seed reach the graph, and
misshaped inputs are named errors that change nothing."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from .policy_helpers import (TINY_MODEL, ActorCriticPolicy, cartpole_spaces,
                            random_fragment)
from tfrl.errors import InvalidBatchError
from tfrl.policy import SampleBatch


def _structured_call(policy, obs, states, explore, timestep):
    """What compute_actions computes, through the tf.function's own argument binding."""
    seed = np.array([policy._seed_base, policy._sample_calls % (2 ** 31)], np.int32)
    return policy._compute_actions_fn(obs, states, tf.constant(explore),
                                      tf.constant(timestep, tf.int64), tf.constant(seed))


@pytest.mark.timeout(120)
def test_nested_recurrent_policy_flat_call_equals_structured_call():
    # keys deliberately not in sorted order: the flat order must still match the signature's
    obs_space = gym.spaces.Dict({"z": gym.spaces.Box(-1, 1, (3,)), "a": gym.spaces.Discrete(4),
                                 "m": gym.spaces.Box(-1, 1, (2, 2))})
    act_space = gym.spaces.MultiDiscrete([2, 3])
    policy = ActorCriticPolicy(obs_space, act_space, {
        "seed": 5, "model": dict(TINY_MODEL, use_lstm=True, lstm_cell_size=3, max_seq_len=4)})
    obs_space.seed(0)
    raw = [obs_space.sample() for _ in range(5)]
    states = [np.random.default_rng(i).normal(size=(5, 3)).astype(np.float32)
              for i in range(2)]
    for explore in (True, False):
        timestep = policy.global_timestep
        actions, state_out, extras = policy.compute_actions(raw, states, explore=explore)
        want_actions, want_states, want_extras = _structured_call(
            policy, policy._convert_obs(raw), [tf.constant(s) for s in states], explore,
            timestep)
        np.testing.assert_array_equal(actions, want_actions.numpy())
        assert len(state_out) == 2
        # the flat and the structured call are separate graphs: float32 rounding may differ
        for got, want in zip(state_out, want_states):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
        assert set(extras) == set(want_extras)
        for k in extras:
            np.testing.assert_allclose(extras[k], want_extras[k].numpy(), rtol=1e-5, atol=1e-6)
        values = policy.compute_values(raw, states)
        np.testing.assert_allclose(values, extras[SampleBatch.VF_PREDS], rtol=1e-5)
    assert policy._compute_actions_fn.experimental_get_tracing_count() == 1


def test_explore_timestep_and_seed_reach_the_graph():
    obs_space, act_space = cartpole_spaces()

    def echo_inputs(policy, model, obs, states, explore, timestep, seed):
        n = tf.shape(obs)[0]
        model({"obs": obs}, states, None)
        return (tf.fill([n], timestep), tf.fill([n], tf.cast(explore, tf.float32)) +
                tf.cast(seed[1], tf.float32) * 10.0, states)

    Echo = ActorCriticPolicy.with_updates(action_sampler_fn=echo_inputs)
    policy = Echo(obs_space, act_space, {"explore": False})
    obs = np.zeros((3, 4), np.float32)
    calls_before = policy._sample_calls  # construction samples a dummy batch once
    expected_explore = [False, True, False, True, False]
    results = [policy.compute_actions(obs, explore=e)
               for e in (None, True, False, True, None)]
    for i, ((actions, _, extras), explore) in enumerate(zip(results, expected_explore)):
        np.testing.assert_array_equal(actions, [3 * i] * 3)  # global timestep before the call
        np.testing.assert_array_equal(extras[SampleBatch.ACTION_LOGP],
                                      [float(explore) + 10.0 * (calls_before + i + 1)] * 3)
    assert policy.global_timestep == 15
    actions, _, _ = policy.compute_actions(obs, timestep=1234)
    np.testing.assert_array_equal(actions, [1234] * 3)
    assert policy.global_timestep == 18


def test_same_seed_same_samples_and_each_call_draws_anew():
    obs_space, act_space = cartpole_spaces()
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    first, second = (ActorCriticPolicy(obs_space, act_space, {"seed": 11}) for _ in range(2))
    second.set_weights(first.get_weights())
    run_a = [first.compute_actions(obs)[0] for _ in range(3)]
    run_b = [second.compute_actions(obs)[0] for _ in range(3)]
    for a, b in zip(run_a, run_b):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(run_a[0], run_a[1])  # 64 near-fair coin flips


@pytest.mark.parametrize("bad_obs", [np.zeros((3, 5), np.float32),  # wrong feature size
                                     np.zeros(4, np.float32),  # no batch dimension
                                     np.zeros((2, 4, 1), np.float32)])
def test_misshaped_observations_are_named_errors_that_change_nothing(ac_policy, bad_obs):
    ac_policy.compute_actions(np.zeros((2, 4), np.float32))
    timestep, calls = ac_policy.global_timestep, ac_policy._sample_calls
    with pytest.raises(InvalidBatchError, match="observation batch"):
        ac_policy.compute_actions(bad_obs)
    with pytest.raises(InvalidBatchError, match="observation batch"):
        ac_policy.compute_values(bad_obs)
    assert (ac_policy.global_timestep, ac_policy._sample_calls) == (timestep, calls)


def test_misshaped_learn_column_is_a_named_error_that_changes_nothing(ac_policy):
    batch = ac_policy.postprocess_trajectory(random_fragment(n=8))
    batch[SampleBatch.ADVANTAGES] = batch[SampleBatch.ADVANTAGES][:, None]  # would broadcast
    weights = ac_policy.get_weights()
    with pytest.raises(InvalidBatchError, match="advantages"):
        ac_policy.learn_on_batch(batch)
    with pytest.raises(InvalidBatchError, match="advantages"):
        ac_policy.compute_gradients(batch)
    assert ac_policy.num_grad_updates == 0
    for before, after in zip(weights, ac_policy.get_weights()):
        np.testing.assert_array_equal(before, after)


def test_learn_on_batch_flat_call_equals_structured_call():
    obs_space, act_space = cartpole_spaces()
    flat, structured = (ActorCriticPolicy(obs_space, act_space, {"seed": 2}) for _ in range(2))
    structured.set_weights(flat.get_weights())
    batch = flat.postprocess_trajectory(random_fragment(n=10, seed=4))
    got = flat.learn_on_batch(batch)
    stats, _ = structured._learn_fn(structured._prepare_batch(batch))
    for k, v in stats.items():
        np.testing.assert_allclose(got[k], v.numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(flat.get_weights(), structured.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
