"""compute_actions through an XLA-compiled action function (`jit_compile_actions`): the same
actions and outputs as the plain graph, a fallback to the graph when XLA cannot compile the
policy, and "auto" turning it on exactly in the remote workers of a single-agent env."""
import logging

import numpy as np
import tensorflow as tf

from .policy_helpers import TINY_MODEL, ActorCriticPolicy, cartpole_spaces
from tfrl.env import make_multi_agent
from tfrl.policy import SampleBatch, build_tf_policy
from tfrl.rollout import RolloutWorker


def test_xla_actions_equal_the_graphs_for_the_same_weights():
    obs_space, act_space = cartpole_spaces()
    graph = ActorCriticPolicy(obs_space, act_space, {"seed": 3})
    xla = ActorCriticPolicy(obs_space, act_space, {"seed": 3, "jit_compile_actions": True})
    xla.set_weights(graph.get_weights())
    assert xla.actions_compiled_with_xla and not graph.actions_compiled_with_xla
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    greedy, _, graph_extras = graph.compute_actions(obs, explore=False)
    xla_greedy, _, xla_extras = xla.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(xla_greedy, greedy)
    assert set(xla_extras) == set(graph_extras)
    for key in graph_extras:
        np.testing.assert_allclose(xla_extras[key], graph_extras[key], rtol=1e-5, atol=1e-6)
    sampled, _, extras = xla.compute_actions(obs, explore=True)
    logits = extras[SampleBatch.ACTION_DIST_INPUTS]
    expected_logp = logits[np.arange(16), sampled] - np.log(np.exp(logits).sum(-1))
    np.testing.assert_allclose(extras[SampleBatch.ACTION_LOGP], expected_logp, rtol=1e-5)
    assert xla.global_timestep == 32


def test_a_policy_xla_cannot_compile_acts_with_the_graph_and_says_so(caplog):
    def host_noise(policy, input_dict, state_batches, model, action_dist):
        obs = input_dict[SampleBatch.OBS]
        noise = tf.numpy_function(lambda x: np.ones(len(x), np.float32), [obs], tf.float32)
        return {"host_noise": tf.reshape(noise, [-1])}

    def imitation_loss(policy, model, dist_class, train_batch):
        logits, _ = model.from_batch(train_batch)
        return -tf.reduce_mean(dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS]))

    HostNoisePolicy = build_tf_policy(
        "HostNoisePolicy", loss_fn=imitation_loss, extra_action_out_fn=host_noise,
        get_default_config=lambda: {"model": TINY_MODEL})
    obs_space, act_space = cartpole_spaces()
    policy = HostNoisePolicy(obs_space, act_space, {"jit_compile_actions": True})
    with caplog.at_level(logging.WARNING, logger="tfrl.policy.tf_policy"):
        actions, _, extras = policy.compute_actions(np.zeros((3, 4), np.float32))
    assert "XLA could not compile" in caplog.text
    assert not policy.actions_compiled_with_xla
    assert actions.shape == (3,)
    np.testing.assert_array_equal(extras["host_noise"], np.ones(3, np.float32))


def _xla_flags(worker):
    return [p.actions_compiled_with_xla for p in worker.policy_map.values()]


def test_auto_compiles_the_actions_of_remote_workers_of_a_single_agent_env_only():
    config = {"num_envs_per_worker": 2, "rollout_fragment_length": 4, "model": TINY_MODEL,
              "numpy_actions": False}
    remote = RolloutWorker("CartPole-v1", ActorCriticPolicy, config, worker_index=1)
    assert _xla_flags(remote) == [True]
    assert remote.sample().count == 8  # rollouts through the compiled function
    # a worker that draws its actions in numpy calls TensorFlow once per fragment, with a
    # batch size that complete_episodes varies: nothing is compiled
    in_numpy = RolloutWorker("CartPole-v1", ActorCriticPolicy, dict(config, numpy_actions=True),
                             worker_index=1)
    assert in_numpy.runner.uses_numpy_actions and _xla_flags(in_numpy) == [False]
    assert _xla_flags(RolloutWorker("CartPole-v1", ActorCriticPolicy, config)) == [False]
    off = RolloutWorker("CartPole-v1", ActorCriticPolicy, dict(config, jit_compile_actions=False),
                        worker_index=1)
    assert _xla_flags(off) == [False]
    multi = RolloutWorker(make_multi_agent("CartPole-v1", 2), ActorCriticPolicy, config,
                          worker_index=1)
    assert _xla_flags(multi) == [False]  # the batch size changes with the agents acting
