"""NumpyPolicy, the TensorFlow-free policy of remote rollout workers: with the TF policy's
weights it gives the same rows (outputs, dtypes, postprocessing, replay signature), draws from the
same distribution, refuses weights of another model, and builds the TF policy with its current
weights when asked for anything else; policies it cannot reproduce get no spec."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.dqn import DQNTFPolicy
from tfrl.agents.ppo.ppo_policy import PPOTFPolicy
from tfrl.errors import CheckpointError
from tfrl.policy.numpy_policy import NumpyPolicy, numpy_policy_spec
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.replay_output import dummy_trajectory, replay_signature

pytestmark = pytest.mark.timeout(120)

CARTPOLE = (gym.spaces.Box(-4.0, 4.0, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-8.0, 8.0, (3,), np.float32),
            gym.spaces.Box(-2.0, 2.0, (1,), np.float32))
CONFIG = {"model": {"fcnet_hiddens": [16, 8]}, "gamma": 0.9, "lambda": 0.8, "seed": 2}


def _pair(spaces, **overrides):
    config = dict(CONFIG, **overrides)
    tf_policy = PPOTFPolicy(*spaces, config)
    spec = numpy_policy_spec(tf_policy)
    assert spec is not None
    numpy_policy = spec(*spaces, config)
    assert isinstance(numpy_policy, NumpyPolicy)
    # weights the initial ones do not have (every bias zero there)
    rng = np.random.default_rng(0)
    weights = [w + rng.normal(0, 0.3, w.shape).astype(np.float32) for w in tf_policy.get_weights()]
    tf_policy.set_weights(weights)
    numpy_policy.set_weights(weights)
    return tf_policy, numpy_policy


def _obs(spaces, n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2, 2, (n,) + spaces[0].shape).astype(np.float32)


@pytest.mark.parametrize("spaces", [CARTPOLE, PENDULUM], ids=["discrete", "box"])
@pytest.mark.parametrize("vf_share_layers", [False, True])
def test_outputs_match_the_tensorflow_policys_for_the_same_weights(spaces, vf_share_layers):
    tf_policy, numpy_policy = _pair(spaces, model={"fcnet_hiddens": [16, 8],
                                                   "vf_share_layers": vf_share_layers})
    obs = _obs(spaces)
    tf_actions, _, tf_extra = tf_policy.compute_actions(obs, explore=False)
    np_actions, state_out, np_extra = numpy_policy.compute_actions(obs, explore=False)
    assert state_out == []
    assert np_actions.dtype == tf_actions.dtype and np_actions.shape == tf_actions.shape
    np.testing.assert_allclose(np_actions, tf_actions, atol=1e-5)
    assert sorted(np_extra) == sorted(tf_extra)
    for key in tf_extra:
        assert np_extra[key].dtype == tf_extra[key].dtype, key
        np.testing.assert_allclose(np_extra[key], tf_extra[key], atol=1e-4, err_msg=key)
    np.testing.assert_allclose(numpy_policy.compute_values(obs), tf_policy.compute_values(obs),
                               atol=1e-4)
    drawn, _, _ = tf_policy.compute_actions(obs, explore=True)
    np.testing.assert_allclose(numpy_policy.compute_log_likelihoods(drawn, obs),
                               tf_policy.compute_log_likelihoods(drawn, obs), atol=1e-4)
    # explored actions: the likelihoods reported are those of the actions drawn
    actions, _, extra = numpy_policy.compute_actions(obs, explore=True)
    np.testing.assert_allclose(extra["action_logp"],
                               tf_policy.compute_log_likelihoods(actions, obs), atol=1e-4)


@pytest.mark.parametrize("spaces", [CARTPOLE, PENDULUM], ids=["discrete", "box"])
def test_postprocessing_and_replay_signature_are_the_tensorflow_policys(spaces):
    tf_policy, numpy_policy = _pair(spaces)
    assert replay_signature(numpy_policy) == replay_signature(tf_policy)
    obs = _obs(spaces, n=9, seed=3)
    actions, _, extra = tf_policy.compute_actions(obs[:8], explore=False)
    rows = {SampleBatch.OBS: obs[:8], SampleBatch.NEXT_OBS: obs[1:], SampleBatch.ACTIONS: actions,
            SampleBatch.REWARDS: np.linspace(0, 1, 8, dtype=np.float32),
            SampleBatch.TERMINATEDS: np.zeros(8, bool), SampleBatch.TRUNCATEDS: np.zeros(8, bool),
            SampleBatch.EPS_ID: np.zeros(8, np.int64), **extra}
    # the fragment was cut mid-episode: both bootstrap from the value of the last new_obs
    ours = numpy_policy.postprocess_trajectory(SampleBatch(dict(rows)))
    theirs = tf_policy.postprocess_trajectory(SampleBatch(dict(rows)))
    for key in (SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS):
        np.testing.assert_allclose(ours[key], theirs[key], atol=1e-4)
    assert sorted(dummy_trajectory(numpy_policy).keys()) == sorted(dummy_trajectory(tf_policy).keys())


def test_draws_follow_the_distribution():
    tf_policy, numpy_policy = _pair(CARTPOLE)
    obs = _obs(CARTPOLE, n=32)
    logits = tf_policy.compute_actions(obs, explore=False)[2]["action_dist_inputs"]
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    draws = np.stack([numpy_policy.compute_actions(obs)[0] for _ in range(2000)])
    # 2000 draws: the standard error of a frequency is at most 0.011
    np.testing.assert_allclose((draws == 1).mean(0), probs[:, 1], atol=0.05)

    tf_policy, numpy_policy = _pair(PENDULUM)
    obs = np.repeat(_obs(PENDULUM, n=1), 4000, axis=0)
    mean, log_std = np.split(tf_policy.compute_actions(obs[:1], explore=False)[2][
        "action_dist_inputs"][0], 2)
    draws = numpy_policy.compute_actions(obs)[0][:, 0]
    assert abs(draws.mean() - mean[0]) < 4 * np.exp(log_std[0]) / np.sqrt(4000)
    assert abs(draws.std() / np.exp(log_std[0]) - 1) < 0.05


def test_weights_of_another_model_are_refused_and_change_nothing():
    tf_policy, numpy_policy = _pair(CARTPOLE)
    before = numpy_policy.get_weights()
    other = PPOTFPolicy(*CARTPOLE, dict(CONFIG, model={"fcnet_hiddens": [8]}))
    with pytest.raises(CheckpointError, match="same model config"):
        numpy_policy.set_weights(other.get_weights())
    for a, b in zip(before, numpy_policy.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert numpy_policy._tf is None  # noqa: SLF001 - refusing built no TF policy


def test_anything_else_builds_the_tensorflow_policy_with_the_current_weights():
    tf_policy, numpy_policy = _pair(CARTPOLE)
    assert numpy_policy._tf is None  # noqa: SLF001 - acting and postprocessing built none
    numpy_policy.on_global_var_update({"timestep": 500})
    model = numpy_policy.model  # not a NumpyPolicy attribute: the TF policy answers
    built = numpy_policy.tf_policy
    assert type(built) is PPOTFPolicy and model is built.model
    assert built.global_timestep == 500
    for a, b in zip(built.get_weights(), tf_policy.get_weights()):
        np.testing.assert_array_equal(a, b)

    # learning through it changes the weights; the numpy copy acts with the new ones
    obs = _obs(CARTPOLE, n=32)
    batch = tf_policy.postprocess_trajectory(SampleBatch({
        SampleBatch.OBS: obs, SampleBatch.NEXT_OBS: obs,
        SampleBatch.ACTIONS: np.ones(32, np.int64), SampleBatch.REWARDS: np.ones(32, np.float32),
        SampleBatch.TERMINATEDS: np.eye(32, dtype=bool)[-1],
        SampleBatch.TRUNCATEDS: np.zeros(32, bool), SampleBatch.EPS_ID: np.zeros(32, np.int64),
        **tf_policy.compute_actions(obs, explore=False)[2]}))
    for _ in range(3):
        numpy_policy.learn_on_batch(batch)
    np.testing.assert_allclose(numpy_policy.compute_values(obs), built.compute_values(obs),
                               atol=1e-4)
    assert np.abs(built.compute_values(obs) - tf_policy.compute_values(obs)).max() > 1e-3
    for a, b in zip(numpy_policy.get_weights(), built.get_weights()):
        np.testing.assert_array_equal(a, b)
    # weights set later reach both
    numpy_policy.set_weights(tf_policy.get_weights())
    np.testing.assert_allclose(built.compute_values(obs), tf_policy.compute_values(obs), atol=1e-6)


def test_dqn_gets_a_stand_in_of_its_own():
    # DQN's epsilon-greedy sampler has a stand-in of its own (tests/tfrl/agents/test_numpy_q_policy.py)
    assert type(numpy_policy_spec(DQNTFPolicy(*CARTPOLE, {}))).__name__ == "NumpyQPolicySpec"


# One policy per test: an LSTM policy's construction (its recurrent loss traced) is the slowest
# here, about 3 s on an idle core, so a loaded machine must not add the others' time to it.
@pytest.mark.parametrize("spaces, config", [
    (CARTPOLE, {"model": {"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 4}}),
    ((gym.spaces.Discrete(5), gym.spaces.Discrete(2)), CONFIG),  # needs a one-hot preprocessor
], ids=["lstm", "one_hot_observations"])
def test_policies_it_cannot_reproduce_get_no_spec(spaces, config):
    assert numpy_policy_spec(PPOTFPolicy(*spaces, config)) is None
    # (the config keys that turn numpy workers off are WorkerSet's: test_numpy_rollout_workers)


def test_a_fragment_hook_runs_on_the_numpy_copy_without_tensorflow():
    def mean_value_column(policy, batch):  # reads only compute_values, as the standard hooks do
        batch["fragment_mean_value"] = np.full(batch.count, policy.compute_values(batch["obs"]).mean())
        return batch

    policy_class = PPOTFPolicy.with_updates(name="FragmentPPO", postprocess_fragment_fn=mean_value_column)
    tf_policy = policy_class(*CARTPOLE, CONFIG)
    spec = numpy_policy_spec(tf_policy)
    assert spec.postprocess_fragment_fn is mean_value_column
    numpy_policy = spec(*CARTPOLE, CONFIG)
    numpy_policy.set_weights(tf_policy.get_weights())
    obs = _obs(CARTPOLE, n=10)
    batch = numpy_policy.postprocess_fragment(SampleBatch({"obs": obs}))
    assert "TensorFlow policy built" not in repr(numpy_policy)
    expected = tf_policy.postprocess_fragment(SampleBatch({"obs": obs}))["fragment_mean_value"]
    np.testing.assert_allclose(batch["fragment_mean_value"], expected, rtol=1e-5)
    # a policy without the hook leaves the batch as it is
    plain = numpy_policy_spec(PPOTFPolicy(*CARTPOLE, CONFIG))
    assert plain.postprocess_fragment_fn is None
