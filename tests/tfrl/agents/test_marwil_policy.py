"""MARWIL's policy: returns-to-go bootstrapped from the value function where an episode piece is
cut, and a loss whose weights are exp(beta * advantage / norm) (all 1 for BC, beta 0)."""
import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.agents.marwil import MARWILTFPolicy
from tfrl.policy.sample_batch import SampleBatch


def policy(beta):
    env = gym.make("CartPole-v1")
    return MARWILTFPolicy(env.observation_space, env.action_space,
                          {"model": {"fcnet_hiddens": [8]}, "beta": beta, "gamma": 0.5})


def piece(terminated_at_end, eps_id=0, n=3):
    rng = np.random.default_rng(eps_id)
    return {"obs": rng.normal(size=(n, 4)).astype(np.float32),
            "new_obs": rng.normal(size=(n, 4)).astype(np.float32),
            "actions": np.arange(n) % 2, "rewards": np.array([1.0, 2.0, 4.0][:n], np.float32),
            "terminateds": np.array([False] * (n - 1) + [terminated_at_end]),
            "truncateds": np.zeros(n, bool), "eps_id": np.full(n, eps_id)}


def test_returns_bootstrap_only_cut_pieces():
    p = policy(1.0)
    ended, cut = piece(True, 0), piece(False, 1)
    batch = SampleBatch({k: np.concatenate([ended[k], cut[k]]) for k in ended})
    out = p.postprocess_trajectory(batch)
    np.testing.assert_allclose(out["advantages"][:3], [1 + 0.5 * 2 + 0.25 * 4, 2 + 0.5 * 4, 4])
    v_last = float(p.value(cut["new_obs"][-1:])[0])
    np.testing.assert_allclose(out["advantages"][3:],
                               [1 + 0.5 * 2 + 0.25 * (4 + 0.5 * v_last),
                                2 + 0.5 * (4 + 0.5 * v_last), 4 + 0.5 * v_last], rtol=1e-5)


def test_bc_weights_every_action_alike_and_marwil_favours_better_ones():
    batch = SampleBatch(piece(True))
    batch["advantages"] = np.array([10.0, 0.0, -10.0], np.float32)
    for beta in (0.0, 1.0):
        p = policy(beta)
        tensors = {k: tf.constant(v) for k, v in batch.items()}
        logits, _ = p.model.from_batch(tensors)
        logp = p.dist_class(logits, p.model).logp(tensors["actions"]).numpy()
        values = p.model.value_function().numpy()
        loss, _, _ = p.loss_and_stats(tensors)
        if beta == 0.0:
            expected = -np.mean(logp)
        else:
            norm = np.sqrt(p.ma_adv_norm.numpy()) + 1e-8
            weights = np.exp((batch["advantages"] - values) / norm)
            expected = -np.mean(weights * logp) + 0.5 * np.mean(
                (batch["advantages"] - values) ** 2)
        np.testing.assert_allclose(float(loss), expected, rtol=1e-4)
