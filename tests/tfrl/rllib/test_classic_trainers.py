"""Classic RLlib trainer code runs on tfrl's core: build_trainer's classic hook forms, the
document's update_kl hook, classic config keys, and trainer classes run by `tune.run`."""
import numpy as np
import pytest
import tensorflow as tf

from tfrl.errors import InvalidConfigError, NotSupportedError
from tfrl.rllib.agents.pg import DEFAULT_CONFIG as PG_CONFIG
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rllib.agents.ppo import PPOTrainer
from tfrl.rllib.agents.trainer_template import build_trainer
from tfrl.rllib.evaluation.postprocessing import discount
from tfrl.rllib.optimizers import SyncSamplesOptimizer
from tfrl.rllib.policy.policy import Policy
from tfrl.rllib.policy.sample_batch import SampleBatch
from tfrl.rllib.policy.tf_policy_template import build_tf_policy
from tfrl.rllib.utils.test_utils import check_learning_achieved

SMALL = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 32,
         "train_batch_size": 32, "model": {"fcnet_hiddens": [8]}}


def policy_gradient_loss(policy, model, dist_class, train_batch):
    """The concepts document's first loss."""
    logits, _ = model.from_batch(train_batch)
    action_dist = dist_class(logits, model)
    return -tf.reduce_mean(action_dist.logp(train_batch[SampleBatch.ACTIONS])
                           * train_batch[SampleBatch.REWARDS])


DocPolicy = build_tf_policy(name="DocPolicy", loss_fn=policy_gradient_loss)


def test_a_trainer_declared_with_only_a_policy_trains(ray_session):
    trainer_cls = build_trainer(name="DocTrainer", default_policy=DocPolicy)
    with trainer_cls(config=SMALL) as trainer:
        result = trainer.train()
    assert result["timesteps_total"] == 32
    assert type(trainer.optimizer).__name__ == "SyncSamplesOptimizer"


def test_two_argument_optimizer_factory_and_after_optimizer_step(ray_session):
    calls, steps = [], []

    def make_optimizer(workers, config):  # classic form: no replay service
        calls.append((workers, config))
        return SyncSamplesOptimizer(workers, num_sgd_iter=2)

    trainer_cls = build_trainer(name="Mine", default_policy=DocPolicy, default_config=PG_CONFIG,
                                make_policy_optimizer=make_optimizer)
    hooked = trainer_cls.with_updates(after_optimizer_step=lambda t, fetches: steps.append(fetches))
    with hooked(config=SMALL) as trainer:
        trainer.train()
        trainer.train()
        (workers, config), = calls
        assert workers is trainer.workers and config is trainer.config
        assert trainer.optimizer.settings.num_sgd_iter == 2  # the keyword setting
    assert len(steps) == 2 and all("default_policy" in fetches for fetches in steps)


def update_kl(trainer, fetches):
    """The concepts document's hook, verbatim."""
    if "kl" in fetches:
        trainer.workers.local_worker().for_policy(lambda pi: pi.update_kl(fetches["kl"]))
    else:
        def update(pi, pi_id):
            if pi_id in fetches:
                pi.update_kl(fetches[pi_id]["kl"])

        trainer.workers.local_worker().foreach_trainable_policy(update)


def test_the_documents_update_kl_hook_adapts_the_coefficient(ray_session):
    # a KL target no update can meet: every step must raise the coefficient by 1.5x
    config = dict(SMALL, train_batch_size=64, sgd_minibatch_size=32, num_sgd_iter=2,
                  lr=1e-2, kl_target=1e-12, kl_coeff=0.2)
    with PPOTrainer.with_updates(after_optimizer_step=update_kl)(config=config) as trainer:
        trainer.train()
        assert float(trainer.get_policy().kl_coeff.numpy()) == pytest.approx(0.3)


def test_classic_config_keys():
    from tfrl.config import apply_classic_keys

    config = {"framework": "tf", "eager": True, "eager_tracing": True, "vf_share_layers": True,
              "model": {}}
    apply_classic_keys(config, "PPO")
    assert config["model"]["vf_share_layers"] is True
    with pytest.raises(InvalidConfigError, match="framework 'torch' is not available.*TensorFlow 2"):
        PGTrainer(config=dict(SMALL, framework="torch"))
    with pytest.raises(InvalidConfigError, match="use_pytorch True"):
        PGTrainer(config=dict(SMALL, use_pytorch=True))
    with pytest.raises(InvalidConfigError, match="eager_tracing must be True or False"):
        PGTrainer(config=dict(SMALL, eager_tracing="yes"))


@pytest.mark.timeout(400)
def test_tune_runs_a_trainer_class_with_its_rollout_workers(ray_session, tmp_path):
    from ray import tune

    trainer_cls = build_trainer(name="TunedDocTrainer", default_policy=DocPolicy)
    config = dict(SMALL, num_workers=2, train_batch_size=64)
    # the trial reserves its rollout workers (the trainer itself, as outside Tune, nothing)
    request = trainer_cls.default_resource_request(config)
    assert request.head_bundle_is_empty and request.required_resources == {"CPU": 2.0}
    analysis = tune.run(trainer_cls, config=dict(config, num_workers=1),
                        stop={"training_iteration": 1}, storage_path=str(tmp_path), verbose=0)
    trial, = analysis.trials
    assert trial.status == "TERMINATED"
    assert trial.last_result["training_iteration"] == 1
    assert trial.last_result["timesteps_total"] == 64
    # the check classic example scripts end with, on Tune's own analysis of the trial
    check_learning_achieved(analysis, 1.0)  # every CartPole episode pays at least 1
    with pytest.raises(ValueError, match="`stop-reward` of 501 not reached"):
        check_learning_achieved(analysis, 501)  # more than CartPole-v1 ever pays


def add_discounted_returns(policy, sample_batch, other_agent_batches=None, episode=None):
    """Classic RLlib's custom-policy example postprocessing: a column no tfrl loss knows."""
    sample_batch["returns"] = discount(sample_batch[SampleBatch.REWARDS], 0.99)
    return sample_batch


def returns_loss(policy, model, dist_class, train_batch):
    logits, _ = model.from_batch(train_batch)
    return -tf.reduce_mean(dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
                           * train_batch["returns"])


ReturnsPolicy = build_tf_policy(
    name="ReturnsPolicy", loss_fn=returns_loss, postprocess_fn=add_discounted_returns,
    stats_fn=lambda policy, batch: {"mean_returns": tf.reduce_mean(batch["returns"])})


def test_a_column_the_postprocessing_adds_reaches_the_loss_undeclared(ray_session):
    trainer_cls = build_trainer(name="ReturnsTrainer", default_policy=ReturnsPolicy)
    with trainer_cls(config=SMALL) as trainer:
        result = trainer.train()
        assert "returns" in trainer.get_policy().loss_input_signature
    assert result["timesteps_total"] == 32
    # CartPole pays 1 a step: the discounted returns of a fragment's steps are all >= 1, and
    # above 1 everywhere but at episode ends
    mean_returns = result["info"]["learner"]["default_policy"]["mean_returns"]
    assert 1.0 < mean_returns < 1 / (1 - 0.99)


class OwnLearnerPolicy(Policy):
    """A from-scratch policy: its own learn_on_batch, no declared loss. It counts the rows it
    was handed and checks the column its postprocessing adds came along."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows_learned = 0

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, info_batch=None, episodes=None, **kwargs):
        return [self.action_space.sample() for _ in obs_batch], [], {}

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        sample_batch["doubled_rewards"] = 2.0 * np.asarray(sample_batch[SampleBatch.REWARDS])
        return sample_batch

    def learn_on_batch(self, samples):
        rewards = np.asarray(samples[SampleBatch.REWARDS])
        assert np.array_equal(np.asarray(samples["doubled_rewards"]), 2.0 * rewards)
        self.rows_learned += len(rewards)
        return {"learner_stats": {"rows": float(len(rewards))}}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


class NoLearnerPolicy(OwnLearnerPolicy):
    learn_on_batch = Policy.learn_on_batch


def test_minibatch_sgd_hands_a_policy_without_a_declared_loss_to_its_learn_on_batch(ray_session):
    trainer_cls = build_trainer(name="OwnLearner", default_policy=OwnLearnerPolicy)
    with trainer_cls(config=SMALL) as trainer:
        first = trainer.train()
        second = trainer.train()
        policy = trainer.get_policy()
    # classic RLlib's SyncSamplesOptimizer: the whole train batch once per step, every
    # postprocessed column in it
    assert policy.rows_learned == 64
    assert first["info"]["learner"]["default_policy"]["rows"] == 32.0
    assert second["timesteps_total"] == 64


def test_minibatch_sgd_refuses_a_policy_with_neither_loss_nor_learn_on_batch(ray_session):
    trainer_cls = build_trainer(name="NoLearner", default_policy=NoLearnerPolicy)
    with pytest.raises(NotSupportedError, match="NoLearnerPolicy.* declares no loss .* and "
                                                "implements no learn_on_batch"):
        trainer_cls(config=SMALL)


def test_weights_move_between_trainers_and_reach_their_remote_workers(ray_session):
    # multi_agent_two_trainers.py's swap: one trainer's policy weights set into another's
    config = dict(SMALL, num_workers=1)
    with PGTrainer(config=config) as source, PGTrainer(config=config) as target:
        source.train()
        weights = source.get_weights(["default_policy"])
        assert list(weights) == ["default_policy"]
        before = target.get_weights()["default_policy"]
        assert any(not np.array_equal(a, b) for a, b in zip(weights["default_policy"], before))
        target.set_weights(weights)
        local = target.get_weights()["default_policy"]
        remote = target.workers.foreach_worker(lambda w: w.get_weights()["default_policy"],
                                               local_worker=False)[0]
        for expected, got_local, got_remote in zip(weights["default_policy"], local, remote):
            assert np.array_equal(expected, got_local)
            assert np.array_equal(expected, got_remote)
        with pytest.raises(InvalidConfigError, match="no_such_policy"):
            target.set_weights({"no_such_policy": []})
