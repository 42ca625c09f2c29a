"""The model optimizer: trains the policy+value network on self-play samples from the replay table.

Samples stream from the replay server through `replay.ReplayDataset` (randomly mirrored left to
right, Connect Four's symmetry), batched and distributed over the replicas of a
`tf.distribute.MirroredStrategy` by `tfrl.learner.MirroredLearner`. The loss is AlphaZero's:
cross-entropy between the policy head and the search's visit distribution, plus the squared
error between the value head and the game's outcome, plus L2 on the kernels. The layers are the
ones `network.forward` computes in numpy, so `get_weights` goes straight to the actors.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf
import tf_keras as keras

import replay
from examples.alphazero import network
from tfrl.learner.mirrored_learner import MirroredLearner, mean_stats, mirrored_strategy


class PolicyValueNet(tf.Module):
    """`network.forward` in TensorFlow over variables initialised from numpy weights."""

    def __init__(self, weights: network.Weights, learning_rate: float, l2: float):
        super().__init__(name="policy_value")
        self.variables_in_order = [tf.Variable(w, name=f"w{i}") for i, w in enumerate(weights)]
        self.optimizer = keras.optimizers.Adam(learning_rate)
        self.l2 = l2

    @property
    def trainable_variables(self):
        return self.variables_in_order

    def __call__(self, observations):
        w = self.variables_in_order
        x = tf.reshape(observations, [tf.shape(observations)[0], -1])
        for kernel, bias in zip(w[:-4:2], w[1:-4:2]):
            x = tf.nn.relu(x @ kernel + bias)
        return x @ w[-4] + w[-3], tf.tanh(x @ w[-2] + w[-1])[:, 0]

    def loss_and_stats(self, batch):
        logits, values = self(batch["observation"])
        policy_loss = -tf.reduce_mean(tf.reduce_sum(batch["policy"] * tf.nn.log_softmax(logits), -1))
        value_loss = tf.reduce_mean(tf.square(values - batch["outcome"]))
        l2 = self.l2 * tf.add_n([tf.nn.l2_loss(k) for k in self.variables_in_order[::2]])
        stats = {"policy_loss": policy_loss, "value_loss": value_loss}
        return policy_loss + value_loss + l2, stats, {}


def _mirror_at_random(sample):
    data = sample.data
    flip = tf.random.uniform([]) < 0.5
    return {"observation": tf.where(flip, tf.reverse(data["observation"], [-1]), data["observation"]),
            "policy": tf.where(flip, tf.reverse(data["policy"], [-1]), data["policy"]),
            "outcome": data["outcome"]}


class AlphaZeroLearner:
    """Trains on the replay table `table` at `address`, starting from `weights`."""

    def __init__(self, address: str, table: str, weights: network.Weights, batch_size: int = 128,
                 learning_rate: float = 1e-3, l2: float = 1e-4):
        strategy = mirrored_strategy()
        self.learner = MirroredLearner(lambda: PolicyValueNet(weights, learning_rate, l2),
                                       strategy=strategy)
        self.dataset = replay.ReplayDataset.from_table_signature(
            address, table, max_in_flight_samples_per_worker=2 * batch_size)
        batches = self.dataset.map(_mirror_at_random).batch(batch_size, drop_remainder=True)
        self.iterator = iter(self.learner.distribute_dataset(batches))

    @property
    def num_replicas(self) -> int:
        return self.learner.num_replicas

    def train(self, num_steps: int) -> Dict[str, float]:
        """`num_steps` gradient steps; returns the mean losses."""
        return mean_stats(self.learner.train(self.iterator, num_steps))

    def get_weights(self) -> List[np.ndarray]:
        return self.learner.get_weights()

    def close(self) -> None:
        self.dataset.close()
