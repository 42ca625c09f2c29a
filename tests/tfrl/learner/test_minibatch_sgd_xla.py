"""MinibatchSGD compiled with XLA (`jit_compile_learner`): the same steps as the plain graph, a
loss XLA cannot compile falling back to the graph, and the key reaching PPO's learner."""
import logging

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.pg.pg_policy import PGTFPolicy, pg_tf_loss
from tfrl.agents.ppo.config import DEFAULT_CONFIG as PPO_CONFIG
from tfrl.agents.ppo.ppo_policy import PPOTFPolicy
from tfrl.learner import mirrored_strategy
from tfrl.learner.minibatch_sgd import MinibatchSGD

pytestmark = pytest.mark.timeout(240)


def _policy(policy_class, config):
    env = gym.make("CartPole-v1")
    try:
        return policy_class(env.observation_space, env.action_space, config)
    finally:
        env.close()


def _ppo_policy():
    return _policy(PPOTFPolicy, dict(PPO_CONFIG, model={"fcnet_hiddens": [16, 16]}, seed=1,
                                     grad_clip=0.5, lr=1e-3))


def _batch(policy, rows):
    """Loss columns of plausible scale: actions in {0, 1}, log-probabilities of a fair coin."""
    rng = np.random.default_rng(3)
    columns = {}
    for name, spec in policy.loss_input_signature.items():
        shape = (rows,) + tuple(spec.shape[1:])
        if spec.dtype.is_integer:
            columns[name] = rng.integers(0, 2, size=shape).astype(spec.dtype.as_numpy_dtype)
        elif name == "action_logp":
            columns[name] = np.full(shape, np.log(0.5), spec.dtype.as_numpy_dtype)
        elif name == "action_dist_inputs":
            columns[name] = np.zeros(shape, spec.dtype.as_numpy_dtype)
        else:
            columns[name] = rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)
    return columns


def _learned(make_policy, jit_compile, batch, initial, calls=2):
    policy = make_policy()
    policy.set_weights(initial)
    sgd = MinibatchSGD(policy, tf.distribute.get_strategy(), num_sgd_iter=3, minibatch_size=32,
                       jit_compile=jit_compile)
    stats = [sgd.learn_on_batch(batch) for _ in range(calls)]
    return sgd, policy.get_weights(), stats


def test_the_compiled_epochs_take_the_graphs_steps():
    reference = _ppo_policy()
    initial = reference.get_weights()
    batch = _batch(reference, 96)  # 3 epochs x 3 minibatches per call, two calls
    plain, plain_weights, plain_stats = _learned(_ppo_policy, False, batch, initial)
    compiled, compiled_weights, compiled_stats = _learned(_ppo_policy, True, batch, initial)
    assert compiled.jit_compile and not plain.jit_compile
    assert max(np.abs(w - i).max() for w, i in zip(compiled_weights, initial)) > 1e-3  # it learned
    for got, want in zip(compiled_weights, plain_weights):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
    for got, want in zip(compiled_stats, plain_stats):
        assert set(got) == set(want)
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-3, abs=1e-5), key


def _loss_with_a_shuffle(policy, model, dist_class, train_batch):
    """PG's loss, plus zero times a value computed with stateless_shuffle (an op without an
    XLA kernel): the loss is PG's, and XLA cannot compile it."""
    order = tf.random.experimental.stateless_shuffle(
        tf.range(tf.shape(train_batch["actions"])[0]), seed=[1, 2])
    return pg_tf_loss(policy, model, dist_class, train_batch) + 0.0 * tf.cast(
        tf.reduce_sum(order), tf.float32)


ShuffledPG = PGTFPolicy.with_updates(name="ShuffledPG", loss_fn=_loss_with_a_shuffle)


def _shuffled_pg():
    return _policy(ShuffledPG, {"model": {"fcnet_hiddens": [8]}, "seed": 0, "lr": 0.01})


def test_a_loss_xla_cannot_compile_trains_through_the_graph_with_a_warning(caplog):
    reference = _shuffled_pg()
    initial = reference.get_weights()
    batch = _batch(reference, 64)
    _, plain_weights, _ = _learned(_shuffled_pg, False, batch, initial)
    with caplog.at_level(logging.WARNING, logger="tfrl.learner.minibatch_sgd"):
        fallen_back, weights, _ = _learned(_shuffled_pg, True, batch, initial)
    assert not fallen_back.jit_compile
    assert "XLA cannot compile ShuffledPG's loss" in caplog.text
    assert caplog.text.count("XLA cannot compile") == 1  # said once, not at every call
    for got, want in zip(weights, plain_weights):  # the failed compile changed nothing
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_several_replicas_train_through_the_graph():
    strategy = mirrored_strategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        policy = _ppo_policy()
    sgd = MinibatchSGD(policy, strategy, num_sgd_iter=1, minibatch_size=32, jit_compile=True)
    assert not sgd.jit_compile
    assert np.isfinite(sgd.learn_on_batch(_batch(policy, 64))["total_loss"])


def test_ppo_trains_through_the_compiled_learner_when_the_key_says_so(ray_session):
    from tfrl.agents.ppo import PPOTrainer

    config = {"num_workers": 0, "rollout_fragment_length": 64, "train_batch_size": 64,
              "sgd_minibatch_size": 32, "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]},
              "jit_compile_learner": True, "num_learner_devices": 1}
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert trainer.optimizer.sgd.jit_compile
        assert result["info"]["num_steps_trained"] == 128
        assert any(np.abs(a - b).max() > 0 for a, b in zip(trainer.get_policy().get_weights(), before))
    finally:
        trainer.stop()
