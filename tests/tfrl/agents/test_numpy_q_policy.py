"""NumpyQPolicy, DQN's rollout-worker side in numpy (tfrl/agents/dqn/numpy_q_policy.py): the same
greedy actions and TD errors (double Q, plain, q_target_bounds, dueling or not) as DQNTFPolicy,
epsilon-greedy draws at the schedule's rate, a TF policy built on demand with its weights, target
weights and epsilon, and refusals of what it cannot reproduce. DQN's remote workers through a
trainer: tests/tfrl/trainer/test_numpy_rollout_workers.py."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.dqn import DEFAULT_CONFIG, DQNTFPolicy
from tfrl.agents.dqn.dqn_policy import numpy_q_policy_spec, sample_epsilon_greedy
from tfrl.errors import CheckpointError
from tfrl.policy import SampleBatch
from tfrl.policy.numpy_policy import numpy_policy_spec
from tfrl.utils.schedules import ConstantSchedule

from .agent_helpers import cartpole_spaces, trainer_config


def make_pair(**overrides):
    """(TF policy, its numpy stand-in) with a target network that differs from the online one."""
    obs_space, act_space = cartpole_spaces()
    config = trainer_config(DEFAULT_CONFIG, **{"hiddens": [16], "n_step": 3, "seed": 4,
                                               "model": {"fcnet_hiddens": [8, 8]}, **overrides})
    policy = DQNTFPolicy(obs_space, act_space, config)
    rng = np.random.default_rng(1)
    policy.set_target_weights([v.numpy() + rng.normal(0, 0.3, v.shape).astype(np.float32)
                               for v in policy.target_model.variables])
    spec = numpy_policy_spec(policy)
    assert spec is not None
    stand_in = spec(obs_space, act_space, config)
    stand_in.set_weights(policy.get_weights())
    stand_in.set_target_weights([v.numpy() for v in policy.target_model.variables])
    return policy, stand_in


def rows(count=64, seed=2):
    rng = np.random.default_rng(seed)
    return dict(obs=rng.normal(size=(count, 4)).astype(np.float32),
                actions=rng.integers(0, 2, count),
                rewards=rng.normal(size=count).astype(np.float32),
                new_obs=rng.normal(size=(count, 4)).astype(np.float32),
                terminateds=rng.random(count) < 0.3,
                n_steps=rng.integers(1, 4, count).astype(np.int32))


def td_errors(policy, r):
    return policy.compute_td_error(r["obs"], r["actions"], r["rewards"], r["new_obs"],
                                   r["terminateds"], np.ones(len(r["rewards"]), np.float32),
                                   n_steps=r["n_steps"])


@pytest.mark.parametrize("overrides", [
    {"dueling": True, "double_q": True},
    {"dueling": False, "double_q": False},
    {"dueling": True, "double_q": False, "q_target_bounds": [-0.2, 0.3]},
    {"dueling": False, "double_q": True, "q_target_bounds": [0, 1], "gamma": 0.5},
])
def test_greedy_actions_and_td_errors_are_the_tf_policys(overrides):
    policy, stand_in = make_pair(**overrides)
    r = rows()
    tf_actions, _, tf_extra = policy.compute_actions(r["obs"], explore=False)
    actions, state, extra = stand_in.compute_actions(r["obs"], explore=False)
    assert actions.dtype == np.int64 and state == [] and extra == tf_extra == {}
    np.testing.assert_array_equal(actions, tf_actions)
    expected = td_errors(policy, r)
    assert np.abs(expected).mean() > 0.05  # the target network differs: errors are not trivial
    np.testing.assert_allclose(td_errors(stand_in, r), expected, rtol=1e-5, atol=1e-5)
    if overrides.get("q_target_bounds"):
        # the clip binds somewhere, so its absence would show
        unclipped_policy, unclipped = make_pair(**dict(overrides, q_target_bounds=None))
        assert not np.allclose(td_errors(unclipped, r), expected, atol=1e-4)


def test_worker_side_priorities_rate_each_fragment_as_the_tf_policy_does():
    policy, stand_in = make_pair(worker_side_prioritization=True, prioritized_replay_eps=1e-3)
    r = rows(32)
    batch = SampleBatch({SampleBatch.OBS: r["obs"], SampleBatch.ACTIONS: r["actions"],
                         SampleBatch.REWARDS: r["rewards"], SampleBatch.NEXT_OBS: r["new_obs"],
                         SampleBatch.TERMINATEDS: r["terminateds"],
                         SampleBatch.N_STEPS: r["n_steps"],
                         SampleBatch.PRIO_WEIGHTS: np.ones(32, np.float32)})
    ours = stand_in.postprocess_fragment(batch.copy())["priorities"]
    theirs = policy.postprocess_fragment(batch.copy())["priorities"]
    assert ours.dtype == np.float32 and (ours >= 1e-3).all()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_epsilon_follows_the_schedule_and_a_set_constant():
    policy, stand_in = make_pair(exploration_config={"initial_epsilon": 1.0, "final_epsilon": 0.0,
                                                     "epsilon_timesteps": 1000})
    obs = rows(500)["obs"]
    greedy, _, _ = stand_in.compute_actions(obs, explore=False)

    def share_not_greedy(timestep):
        actions, _, _ = stand_in.compute_actions(obs, explore=True, timestep=timestep)
        return float(np.mean(actions != greedy))

    # epsilon 1 at timestep 0: every action uniform, half of them differ from the greedy one
    assert share_not_greedy(0) == pytest.approx(0.5, abs=0.08)
    assert share_not_greedy(1000) == 0.0
    stand_in.set_epsilon_schedule(ConstantSchedule(0.5))
    assert share_not_greedy(1000) == pytest.approx(0.25, abs=0.07)
    before = stand_in.global_timestep
    stand_in.compute_actions(obs[:7])
    assert stand_in.global_timestep == before + 7


def test_the_tf_policy_built_on_demand_has_its_weights_target_and_epsilon():
    policy, stand_in = make_pair()
    stand_in.set_epsilon_schedule(ConstantSchedule(0.125))
    r = rows()
    expected = td_errors(stand_in, r)
    assert repr(stand_in) == "NumpyQPolicy(DQNTFPolicy, numpy only)"
    built = stand_in.tf_policy
    assert repr(stand_in) == "NumpyQPolicy(DQNTFPolicy, with its TensorFlow policy built)"
    assert float(built.cur_epsilon.numpy()) == pytest.approx(0.125)
    np.testing.assert_allclose(td_errors(built, r), expected, rtol=1e-5, atol=1e-5)
    # from then on the TF policy's weights are the truth: a change made through the stand-in
    # (answered by the TF policy) reaches the numpy side
    stand_in.update_target(tau=1.0)
    np.testing.assert_allclose(td_errors(stand_in, r), td_errors(built, r), rtol=1e-5, atol=1e-5)
    assert not np.allclose(td_errors(stand_in, r), expected, atol=1e-4)


def test_weights_of_another_shape_are_refused():
    _, stand_in = make_pair()
    wrong = [np.zeros((3, 3), np.float32)] * len(stand_in.get_weights())
    with pytest.raises(CheckpointError, match="weights of shapes"):
        stand_in.set_weights(wrong)
    with pytest.raises(CheckpointError, match="target weights"):
        stand_in.set_target_weights(wrong)


def test_policies_it_cannot_reproduce_get_no_stand_in():
    obs_space, act_space = cartpole_spaces()
    config = trainer_config(DEFAULT_CONFIG, hiddens=[8], model={"fcnet_hiddens": [8]})

    def other_sampler(*args):  # a sampler of its own, whatever it does
        return sample_epsilon_greedy(*args)

    class HandWritten(DQNTFPolicy):
        def compute_actions(self, *args, **kwargs):
            return super().compute_actions(*args, **kwargs)

    variant = DQNTFPolicy.with_updates(name="OtherSampler", action_sampler_fn=other_sampler)
    for cls in (variant, HandWritten):
        assert numpy_q_policy_spec(cls(obs_space, act_space, config)) is None
    same_declaration = DQNTFPolicy.with_updates(name="Renamed")
    spec = numpy_policy_spec(same_declaration(obs_space, act_space, config))
    assert spec is not None and spec.__name__ == "NumpyQPolicy(Renamed)"
    boxes = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    image_config = trainer_config(DEFAULT_CONFIG, hiddens=[8],
                                  model={"conv_filters": [[4, [4, 4], 4], [8, [2, 2], 1]]})
    assert numpy_q_policy_spec(DQNTFPolicy(boxes, act_space, image_config)) is None
