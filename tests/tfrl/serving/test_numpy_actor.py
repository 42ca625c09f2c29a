"""NumpyActor against the TensorFlow policy it copies: the same distribution inputs, the same
greedy actions, draws from the same distribution; None for policies it cannot reproduce."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.dqn import DEFAULT_CONFIG as DQN_CONFIG
from tfrl.agents.dqn import DQNTFPolicy
from tfrl.agents.pg import DEFAULT_CONFIG as PG_CONFIG
from tfrl.agents.pg import PGTFPolicy
from tfrl.agents.ppo import DEFAULT_CONFIG as PPO_CONFIG
from tfrl.agents.ppo import PPOTFPolicy
from tfrl import errors
from tfrl.policy.numpy_actor import NumpyActor

from tests.tfrl.agents.agent_helpers import cartpole_spaces, trainer_config

PENDULUM = gym.make("Pendulum-v1")


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_categorical_policy_matches_tensorflow(activation):
    obs_space, act_space = cartpole_spaces()
    policy = PGTFPolicy(obs_space, act_space, trainer_config(
        PG_CONFIG, seed=5, model={"fcnet_hiddens": [16, 8], "fcnet_activation": activation}))
    actor = NumpyActor.from_policy(policy, seed=0)
    assert actor is not None and actor.distribution == "categorical"
    obs = np.random.default_rng(1).normal(size=(32, 4)).astype(np.float32)
    greedy, _, extra = policy.compute_actions(obs, explore=False)
    for i in range(len(obs)):
        np.testing.assert_allclose(actor.distribution_inputs(obs[i]),
                                   extra["action_dist_inputs"][i], rtol=1e-4, atol=1e-5)
        assert actor.act(obs[i], explore=False)[0] == greedy[i]
    # exploring: draws follow softmax(logits)
    logits = np.array([1.5, -0.5])
    actor._layers[-1] = (np.zeros_like(actor._layers[-1][0]), logits, actor._layers[-1][2])
    draws = np.array([actor.act(obs[0])[0] for _ in range(20000)])
    expected = np.exp(logits) / np.exp(logits).sum()
    assert abs(np.mean(draws == 0) - expected[0]) < 0.015
    assert draws.dtype == np.int64 and set(np.unique(draws)) <= {0, 1}


def test_categorical_index_draws_as_act_does_for_flat_float32_observations():
    obs_space, act_space = cartpole_spaces()
    policy = PGTFPolicy(obs_space, act_space, trainer_config(
        PG_CONFIG, seed=3, model={"fcnet_hiddens": [16]}))
    acting, indexing = NumpyActor.from_policy(policy, seed=11), NumpyActor.from_policy(policy, seed=11)
    obs = np.random.default_rng(2).normal(size=(200, 4)).astype(np.float32)
    drawn = [indexing.categorical_index(o) for o in obs]
    assert drawn == [int(acting.act(o)[0]) for o in obs]  # the same generator, the same draws
    assert all(type(a) is int for a in drawn) and len(set(drawn)) == 2
    greedy, _, _ = policy.compute_actions(obs, explore=False)
    assert [indexing.categorical_index(o, explore=False) for o in obs] == greedy.tolist()


def test_gaussian_policy_matches_tensorflow():
    policy = PPOTFPolicy(PENDULUM.observation_space, PENDULUM.action_space, trainer_config(
        PPO_CONFIG, seed=7, model={"fcnet_hiddens": [16]}))
    actor = NumpyActor.from_policy(policy, seed=0)
    assert actor is not None and actor.distribution == "diag_gaussian"
    obs = np.array([[0.3, -0.9, 0.5]], np.float32)
    mean, _, extra = policy.compute_actions(obs, explore=False)
    inputs = actor.distribution_inputs(obs[0])
    np.testing.assert_allclose(inputs, extra["action_dist_inputs"][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(actor.act(obs[0], explore=False), mean, rtol=1e-4, atol=1e-5)
    draws = np.concatenate([actor.act(obs[0]) for _ in range(20000)])
    assert draws.dtype == np.float32 and draws.shape == (20000, 1)
    assert abs(draws.mean() - inputs[0]) < 0.05
    assert abs(draws.std() - np.exp(inputs[1])) < 0.05 * np.exp(inputs[1])


def test_policies_it_cannot_reproduce_get_none():
    obs_space, act_space = cartpole_spaces()
    # epsilon-greedy over Q-values: an action sampler, not a distribution
    dqn = DQNTFPolicy(obs_space, act_space, trainer_config(DQN_CONFIG, seed=1))
    assert NumpyActor.from_policy(dqn) is None
    recurrent = PGTFPolicy(obs_space, act_space, trainer_config(
        PG_CONFIG, seed=1, model={"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8}))
    assert NumpyActor.from_policy(recurrent) is None


@pytest.mark.parametrize("share_layers", [False, True])
def test_outputs_of_actions_are_the_policys_own_for_categorical_and_gaussian(share_layers):
    obs_space, act_space = cartpole_spaces()
    model = {"fcnet_hiddens": [16, 8], "vf_share_layers": share_layers}
    rng = np.random.default_rng(4)
    cases = [(PPOTFPolicy(obs_space, act_space, trainer_config(PPO_CONFIG, seed=2, model=model)),
              rng.normal(size=(40, 4)).astype(np.float32), rng.integers(0, 2, 40)),
             (PPOTFPolicy(PENDULUM.observation_space, PENDULUM.action_space,
                          trainer_config(PPO_CONFIG, seed=2, model=model)),
              rng.normal(size=(40, 3)).astype(np.float32),
              rng.normal(size=(40, 1)).astype(np.float32))]
    for policy, obs, actions in cases:
        actor = NumpyActor.from_policy(policy, seed=0)
        assert actor.reproduces_outputs
        # non-zero weights everywhere, so a wrong layer or branch shows
        policy.set_weights([w + rng.normal(scale=0.3, size=w.shape).astype(w.dtype)
                            for w in policy.get_weights()])
        actor.load_weights(policy)
        want_actions, want = policy.compute_outputs_of_actions(obs, actions)
        got_actions, got = actor.outputs_of_actions(obs, actions)
        assert got_actions.dtype == want_actions.dtype
        np.testing.assert_array_equal(got_actions, want_actions)
        assert sorted(got) == sorted(want)
        for key in want:
            assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
            np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-4, err_msg=key)
        assert np.ptp(got["vf_preds"]) > 0.01 and np.ptp(got["action_logp"]) > 0.01


def test_a_policy_with_extra_outputs_of_its_own_is_acted_for_but_not_reproduced():
    import tensorflow as tf

    obs_space, act_space = cartpole_spaces()
    CountingPolicy = PGTFPolicy.with_updates(
        name="CountingPolicy",
        extra_action_out_fn=lambda policy, input_dict, states, model, dist: {
            "obs_sum": tf.reduce_sum(input_dict["obs"], axis=-1)})
    policy = CountingPolicy(obs_space, act_space, trainer_config(PG_CONFIG, seed=1))
    actor = NumpyActor.from_policy(policy)
    assert actor is not None and not actor.reproduces_outputs  # it acts, the policy adds outputs
    with pytest.raises(errors.NotSupportedError, match="its own"):
        actor.outputs_of_actions(np.zeros((2, 4), np.float32), np.zeros(2, np.int64))
