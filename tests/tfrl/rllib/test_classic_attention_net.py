"""Classic RLlib's attention nets (`ray.rllib.models.tf.attention_net`): GTrXLNet and TrXLNet as
recurrent custom models, their state layout, their memory across calls, sampling and learning
computing the same outputs, and a tiny PPO learning step; the transformer layers under their
classic names in `ray.rllib.models.tf.layers`."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.rllib.agents.ppo.ppo_tf_policy import PPOTFPolicy
from tfrl.rllib.models.tf.attention_net import GTrXLNet, TrXLNet
from tfrl.rllib.models.tf.layers import (GRUGate, MultiHeadAttention, NoisyLayer,
                                         RelativeMultiHeadAttention, SkipConnection)
from tfrl.rllib.utils.framework import try_import_tf

tf1, tf, tfv = try_import_tf()

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
GTRXL = dict(num_transformer_units=2, attn_dim=8, num_heads=2, memory_tau=4, head_dim=4,
             ff_hidden_dim=8)
TRXL = dict(num_transformer_units=1, attn_dim=8, num_heads=2, head_dim=4, ff_hidden_dim=8)


def _gtrxl(max_seq_len=5, **options):
    return GTrXLNet(OBS, gym.spaces.Discrete(2), 2, {"max_seq_len": max_seq_len}, "gtrxl",
                    **dict(GTRXL, **options))


def _batched(initial_state, batch):
    return [np.repeat(s[None], batch, axis=0) for s in initial_state]


def _step_by_step(model, rows, state):
    """Outputs [T, 2] and the final state of feeding `rows` [T, 3] one step at a time."""
    outputs = []
    for row in rows:
        out, state = model({"obs": row[None]}, state, np.ones(1, np.int32))
        outputs.append(out.numpy())
    return np.concatenate(outputs), state


def _rows(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 3)).astype(np.float32)


def test_gtrxl_state_is_the_observation_window_and_one_memory_per_unit():
    model = _gtrxl()
    shapes = [s.shape for s in model.get_initial_state()]
    assert shapes == [(5, 3), (4, 8), (4, 8)]
    rows = _rows(10)  # two sequences of 5 steps
    outputs, state = model({"obs": rows}, _batched(model.get_initial_state(), 2),
                           np.array([5, 5], np.int32))
    assert outputs.shape == (10, 2) and model.value_function().shape == (10,)
    assert [tuple(s.shape) for s in state] == [(2, 5, 3), (2, 4, 8), (2, 4, 8)]
    # the window holds the last max_seq_len observations of each sequence
    np.testing.assert_allclose(state[0].numpy(), rows.reshape(2, 5, 3))


def test_trxl_state_is_the_observation_window():
    model = TrXLNet(OBS, gym.spaces.Discrete(2), 2, {"max_seq_len": 4}, "trxl", **TRXL)
    assert [s.shape for s in model.get_initial_state()] == [(4, 3)]
    rows = _rows(3)
    outputs, state = model({"obs": rows}, _batched(model.get_initial_state(), 1),
                           np.array([3], np.int32))
    assert outputs.shape == (3, 2) and model.value_function().shape == (3,)
    np.testing.assert_allclose(state[0].numpy()[0], np.concatenate([np.zeros((1, 3)), rows]))


def test_the_memory_carries_an_earlier_observation_to_later_calls():
    model = _gtrxl(num_transformer_units=1)
    initial = _batched(model.get_initial_state(), 1)
    rows = _rows(6)
    changed = rows.copy()
    changed[0] += 0.5
    base, _ = _step_by_step(model, rows, initial)
    other, _ = _step_by_step(model, changed, initial)
    # step 4 sees step 0 only through the memory (one unit reaches memory_tau = 4 steps back)
    assert not np.allclose(base[4], other[4], atol=1e-6)
    # step 5 is 5 steps on: beyond the reach of the one unit's attention
    np.testing.assert_allclose(base[5], other[5], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("build", [
    lambda: _gtrxl(),
    lambda: TrXLNet(OBS, gym.spaces.Discrete(2), 2, {"max_seq_len": 5}, "trxl", **TRXL),
], ids=["GTrXLNet", "TrXLNet"])
def test_a_train_sequence_gets_the_outputs_sampling_computed(build):
    """Sampling feeds one step at a time; learning feeds sequences of max_seq_len steps with
    the state recorded at their first step: both compute the same outputs and final state."""
    model = build()
    rows = _rows(10, seed=1)
    initial = _batched(model.get_initial_state(), 1)
    stepped, _ = _step_by_step(model, rows[:5], initial)
    stepped_on, _ = _step_by_step(model, rows, initial)
    _, state_at_5 = _step_by_step(model, rows[:5], initial)
    first, first_state = model({"obs": rows[:5]}, initial, np.array([5], np.int32))
    second, _ = model({"obs": rows[5:]}, state_at_5, np.array([5], np.int32))
    np.testing.assert_allclose(first.numpy(), stepped, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second.numpy(), stepped_on[5:], rtol=1e-4, atol=1e-5)
    for a, b in zip(first_state, state_at_5):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_padded_sequences_give_each_sequence_its_own_outputs_and_state():
    model = _gtrxl()
    rows = _rows(10, seed=2)
    seq_lens = np.array([2, 4], np.int32)  # two sequences padded to 5 steps
    outputs, state = model({"obs": rows}, _batched(model.get_initial_state(), 2), seq_lens)
    for b, length in enumerate(seq_lens):
        alone, alone_state = model({"obs": rows[5 * b:5 * b + length]},
                                   _batched(model.get_initial_state(), 1),
                                   np.array([length], np.int32))
        np.testing.assert_allclose(outputs.numpy()[5 * b:5 * b + length], alone.numpy(),
                                   rtol=1e-4, atol=1e-5)
        for a, s in zip(state, alone_state):
            np.testing.assert_allclose(a.numpy()[b], s.numpy()[0], rtol=1e-4, atol=1e-5)


def test_the_classic_layers_are_importable_and_keep_their_shapes():
    x = tf.random.normal([2, 5, 8])
    memory = tf.random.normal([2, 3, 8])
    attention = RelativeMultiHeadAttention(out_dim=8, num_heads=2, head_dim=4,
                                           input_layernorm=True, output_activation=tf.nn.relu)
    assert attention(x, memory=memory).shape == (2, 5, 8)
    assert MultiHeadAttention(out_dim=6, num_heads=2, head_dim=4)(x).shape == (2, 5, 6)
    assert SkipConnection(tf.keras.layers.Dense(8))(x).shape == (2, 5, 8)
    gated = SkipConnection(tf.keras.layers.Dense(8), fan_in_layer=GRUGate(init_bias=20.0))
    # a large gate bias closes the gate: the input passes through
    np.testing.assert_allclose(gated(x).numpy(), x.numpy(), atol=1e-5)
    assert callable(NoisyLayer)


def test_causal_attention_ignores_later_steps():
    layer = MultiHeadAttention(out_dim=4, num_heads=2, head_dim=2)
    x = np.random.default_rng(3).normal(size=(1, 4, 4)).astype(np.float32)
    changed = x.copy()
    changed[0, 3] += 1.0
    np.testing.assert_allclose(layer(x).numpy()[0, :3], layer(changed).numpy()[0, :3],
                               rtol=1e-5, atol=1e-6)


def test_a_tiny_ppo_with_gtrxlnet_samples_and_learns_on_cartpole():
    from tfrl.rllib.evaluation import RolloutWorker

    config = {"model": {"custom_model": GTrXLNet, "max_seq_len": 10,
                        "custom_model_config": dict(GTRXL, memory_tau=6)},
              "rollout_fragment_length": 40, "sgd_minibatch_size": 20, "num_sgd_iter": 1}
    worker = RolloutWorker(lambda _: gym.make("CartPole-v1"), PPOTFPolicy, config)
    policy = worker.get_policy()
    assert policy.is_recurrent() and isinstance(policy.model, GTrXLNet)
    batch = worker.sample()
    assert batch["state_in_0"].shape[1:] == (10, 4)
    assert batch["state_in_1"].shape[1:] == (6, 8)
    before = [w.copy() for w in policy.get_weights()]
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["total_loss"])
    assert any(not np.allclose(a, b) for a, b in zip(before, policy.get_weights()))
