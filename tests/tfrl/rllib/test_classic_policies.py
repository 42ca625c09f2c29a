"""Classic RLlib policy code runs on tfrl's core: custom policies returning Python lists,
`SampleBatch.concat_samples`, and build_tf_policy declarations in the classic PPO style
(explicit mixin set-up calls, a three-argument gradients_fn, one-argument
extra_action_fetches_fn, `policy.loss_obj`, `model.trainable_variables()`)."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.rllib.agents.ppo import DEFAULT_CONFIG as PPO_CONFIG
from tfrl.rllib.agents.ppo.ppo_tf_policy import (BEHAVIOUR_LOGITS, KLCoeffMixin, PPOTFPolicy,
                                                 ValueNetworkMixin, postprocess_ppo_gae,
                                                 ppo_surrogate_loss)
from tfrl.rllib.evaluation import RolloutWorker
from tfrl.rllib.models import ModelCatalog
from tfrl.rllib.models.tf.tf_action_dist import Categorical
from tfrl.rllib.evaluation.postprocessing import Postprocessing
from tfrl.rllib.policy.policy import Policy
from tfrl.rllib.policy.sample_batch import SampleBatch
from tfrl.rllib.policy.tf_policy import LearningRateSchedule
from tfrl.rllib.policy.tf_policy_template import build_tf_policy
from tfrl.policy.sample_batch import concat_samples


def cartpole(_config=None):
    return gym.make("CartPole-v1")


class ListPolicy(Policy):
    """The concepts document's from-scratch policy: actions, recurrent state and extra values
    all returned as Python lists."""

    def get_initial_state(self):
        return [0]

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, info_batch=None, episodes=None, **kwargs):
        extras = {"some_value": ["foo" for _ in obs_batch], "other_value": [7 for _ in obs_batch]}
        return ([self.action_space.sample() for _ in obs_batch],
                [[t + 1 for t in state_batches[0]]], extras)

    def learn_on_batch(self, samples):
        return {}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


def test_a_policy_returning_python_lists_is_sampled_into_columns():
    worker = RolloutWorker(cartpole, ListPolicy,
                           {"rollout_fragment_length": 30, "num_envs_per_worker": 2})
    batch = worker.sample()
    assert batch.count == 60
    state_in, state_out = batch["state_in_0"], batch["state_out_0"]
    np.testing.assert_array_equal(state_out, state_in + 1)
    first_episode = batch[SampleBatch.EPS_ID] == batch[SampleBatch.EPS_ID][0]
    np.testing.assert_array_equal(state_in[first_episode][:3], [0, 1, 2])  # counts env steps
    assert set(batch["some_value"]) == {"foo"} and set(batch["other_value"]) == {7}
    assert set(np.unique(batch[SampleBatch.ACTIONS])) <= {0, 1}


def test_sample_batch_concat_samples_is_the_project_function():
    assert SampleBatch.concat_samples is concat_samples
    a = SampleBatch({"obs": np.zeros((2, 3)), "rewards": np.ones(2)})
    b = SampleBatch({"obs": np.ones((3, 3)), "rewards": np.zeros(3)})
    joined = SampleBatch.concat_samples([a, b])
    assert joined.count == 5
    np.testing.assert_array_equal(joined["rewards"], [1, 1, 0, 0, 0])


def classic_stats(policy, train_batch):
    return {"total_loss": policy.loss_obj.loss, "kl": policy.loss_obj.mean_kl,
            "vf_loss": policy.loss_obj.mean_vf_loss, "cur_lr": tf.cast(policy.cur_lr, tf.float64)}


def classic_fetches(policy):
    return {SampleBatch.VF_PREDS: policy.model.value_function(),
            BEHAVIOUR_LOGITS: policy.model.last_output()}


GRADIENT_CALLS = []


def classic_clip_gradients(policy, optimizer, loss):
    GRADIENT_CALLS.append(policy.config["grad_clip"])
    if policy.config["grad_clip"] is not None:
        grads = tf.gradients(loss, policy.model.trainable_variables())
        policy.grads, _ = tf.clip_by_global_norm(grads, policy.config["grad_clip"])
        return list(zip(policy.grads, policy.model.trainable_variables()))
    return optimizer.compute_gradients(loss, colocate_gradients_with_ops=True)


def classic_setup_mixins(policy, obs_space, action_space, config):
    ValueNetworkMixin.__init__(policy, obs_space, action_space, config)
    KLCoeffMixin.__init__(policy, config)
    LearningRateSchedule.__init__(policy, config["lr"], config["lr_schedule"])


ClassicPPOPolicy = build_tf_policy(
    name="ClassicPPOPolicy",
    get_default_config=lambda: PPO_CONFIG,
    loss_fn=ppo_surrogate_loss,
    stats_fn=classic_stats,
    extra_action_fetches_fn=classic_fetches,
    postprocess_fn=postprocess_ppo_gae,
    gradients_fn=classic_clip_gradients,
    before_loss_init=classic_setup_mixins,
    obs_include_prev_action_reward=True,
    mixins=[LearningRateSchedule, KLCoeffMixin, ValueNetworkMixin])


@pytest.mark.parametrize("grad_clip", [None, 0.5])
def test_a_classic_ppo_declaration_learns(grad_clip):
    GRADIENT_CALLS.clear()
    config = {"rollout_fragment_length": 64, "model": {"fcnet_hiddens": [8]},
              "grad_clip": grad_clip, "lr": 1e-2}
    worker = RolloutWorker(cartpole, ClassicPPOPolicy, config)
    policy = worker.get_policy()
    assert float(policy.kl_coeff.numpy()) == pytest.approx(PPO_CONFIG["kl_coeff"])  # from the config
    batch = worker.sample()
    assert Postprocessing.ADVANTAGES in batch and SampleBatch.VF_PREDS in batch
    before = [v.numpy().copy() for v in policy.model.trainable_variables()]
    stats = policy.learn_on_batch(batch)
    stats = stats.get("learner_stats", stats)
    assert np.isfinite(stats["total_loss"]) and stats["cur_lr"] == pytest.approx(1e-2)
    assert GRADIENT_CALLS and set(GRADIENT_CALLS) == {grad_clip}  # the classic hook made the grads
    after = policy.model.trainable_variables()
    assert any(not np.allclose(b, a.numpy()) for b, a in zip(before, after))


def test_model_variables_are_a_tuple_and_callable():
    worker = RolloutWorker(cartpole, ClassicPPOPolicy, {"model": {"fcnet_hiddens": [8]}})
    model = worker.get_policy().model
    assert isinstance(model.trainable_variables, tuple)
    assert model.trainable_variables() == model.trainable_variables
    assert set(model.variables(as_dict=True)) == {v.name for v in model.variables}


class CentralValueMixin:
    """centralized_critic.py's mixin: a no-argument __init__ its hooks call themselves."""

    def __init__(self):
        from tfrl.rllib.utils.tf_ops import make_tf_callable

        self.compute_central_vf = make_tf_callable(self.get_session())(
            lambda obs: tf.reduce_sum(obs, axis=-1))


POSTPROCESSED_WITH_LOSS = []


def central_value_postprocessing(policy, sample_batch, other_agent_batches=None, episode=None):
    # classic: zeros while the loss is being built, the central value function afterwards
    POSTPROCESSED_WITH_LOSS.append(policy.loss_initialized())
    if policy.loss_initialized():
        sample_batch[SampleBatch.VF_PREDS] = np.asarray(
            policy.compute_central_vf(sample_batch[SampleBatch.CUR_OBS]), np.float32)
    else:
        sample_batch[SampleBatch.VF_PREDS] = np.zeros_like(sample_batch[SampleBatch.REWARDS])
    return postprocess_ppo_gae(policy, sample_batch, other_agent_batches, episode)


def central_value_setup(policy, obs_space, action_space, config):
    CentralValueMixin.__init__(policy)


CentralValuePolicy = build_tf_policy(
    name="CentralValuePolicy", get_default_config=lambda: PPO_CONFIG,
    loss_fn=ppo_surrogate_loss, postprocess_fn=central_value_postprocessing,
    before_loss_init=central_value_setup,
    mixins=[LearningRateSchedule, KLCoeffMixin, ValueNetworkMixin, CentralValueMixin])


def test_a_mixin_with_its_own_init_is_left_to_the_hooks_and_loss_initialized_says_when():
    POSTPROCESSED_WITH_LOSS.clear()
    worker = RolloutWorker(cartpole, CentralValuePolicy,
                           {"rollout_fragment_length": 16, "model": {"fcnet_hiddens": [8]}})
    policy = worker.get_policy()
    assert policy.get_session() is None and policy.loss_initialized()
    assert POSTPROCESSED_WITH_LOSS == [False]  # construction's dummy batch
    batch = worker.sample()
    assert POSTPROCESSED_WITH_LOSS[1:] and all(POSTPROCESSED_WITH_LOSS[1:])
    np.testing.assert_allclose(batch[SampleBatch.VF_PREDS], batch["obs"].sum(axis=1), rtol=1e-5,
                               atol=1e-6)


class SeedlessCategorical(Categorical):
    """A classic custom distribution: its `sample()` takes no seed (classic RLlib's API), and
    it counts its draws."""

    draws = 0

    def sample(self):
        SeedlessCategorical.draws += 1
        return tf.random.categorical(self.inputs, 1, dtype=tf.int64)[:, 0]


def test_a_custom_distribution_whose_sample_takes_no_seed_acts_and_learns():
    ModelCatalog.register_custom_action_dist("seedless_categorical", SeedlessCategorical)
    config = dict(PPO_CONFIG, model={"fcnet_hiddens": [8], "custom_action_dist": "seedless_categorical"},
                  train_batch_size=64, sgd_minibatch_size=32, num_sgd_iter=1, rollout_fragment_length=64)
    worker = RolloutWorker(lambda _: gym.make("CartPole-v1"), PPOTFPolicy, config)
    policy = worker.get_policy()
    batch = worker.sample()
    assert SeedlessCategorical.draws > 0  # its own sample() drew the actions
    assert set(np.unique(batch["actions"])) <= {0, 1}
    assert (batch["action_logp"] <= 0.0).all()
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["total_loss"])


class TwoBitsEnv(gym.Env):
    """One-step episodes with a Tuple(Discrete(2), Discrete(2)) action: reward 1 when both
    bits are equal."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])

    def __init__(self, _config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), float(action[0] == action[1]), True, False, {}


class FlatActionsDistribution(Categorical):
    """A classic custom distribution of a Tuple(Discrete(2), Discrete(2)) action space: two
    categoricals over its 4 inputs; it samples the space's tuple and reads the actions its
    `logp` gets as classic RLlib's flat [B, 2] tensor (`actions[:, 0]`). Records what `logp`
    was given."""

    given = []

    def sample(self):
        return (tf.random.categorical(self.inputs[:, :2], 1, dtype=tf.int64)[:, 0],
                tf.random.categorical(self.inputs[:, 2:], 1, dtype=tf.int64)[:, 0])

    def deterministic_sample(self):
        return (tf.argmax(self.inputs[:, :2], axis=1), tf.argmax(self.inputs[:, 2:], axis=1))

    def logp(self, actions):
        FlatActionsDistribution.given.append((actions.dtype, actions.shape.rank))
        return (Categorical(self.inputs[:, :2]).logp(actions[:, 0])
                + Categorical(self.inputs[:, 2:]).logp(actions[:, 1]))

    @staticmethod
    def required_model_output_shape(action_space, model_config):
        return 4


def test_a_custom_distribution_of_a_tuple_action_space_gets_classic_flat_actions():
    ModelCatalog.register_custom_action_dist("flat_actions", FlatActionsDistribution)
    FlatActionsDistribution.given.clear()
    config = dict(PPO_CONFIG, model={"fcnet_hiddens": [8], "custom_action_dist": "flat_actions"},
                  train_batch_size=32, sgd_minibatch_size=32, num_sgd_iter=1,
                  rollout_fragment_length=32, seed=3)
    worker = RolloutWorker(TwoBitsEnv, PPOTFPolicy, config)
    try:
        policy = worker.get_policy()
        assert policy.dist_class.__name__ == "FlatActionsDistribution"
        batch = worker.sample()
        # acting and the batch keep the space's tuple of actions
        first, second = batch["actions"]
        assert set(np.unique(first)) <= {0, 1} and set(np.unique(second)) <= {0, 1}
        logits = batch["action_dist_inputs"]
        want = [np.log(np.exp(row[a]) / np.exp(row).sum())
                for part, actions in ((logits[:, :2], first), (logits[:, 2:], second))
                for row, a in zip(part, actions)]
        np.testing.assert_allclose(batch["action_logp"],
                                   np.reshape(want, (2, -1)).sum(axis=0), rtol=1e-4, atol=1e-5)
        stats = policy.learn_on_batch(batch)
    finally:
        worker.stop()
    assert np.isfinite(stats["total_loss"])
    # every logp call (acting, loss initialisation, learning) got one [B, 2] int64 tensor
    assert FlatActionsDistribution.given
    assert set(FlatActionsDistribution.given) == {(tf.int64, 2)}
