"""ActorCriticQModel: the model of the continuous-control algorithms (DDPG, TD3, SAC).

This is a model (a TFModel, like fcnet.py) that the DDPG and SAC policies build twice (online
and target network). It holds three separate dense stacks over the flattened observation:

- the actor: `actor_hiddens` layers, then `num_outputs` linear outputs (what `forward` returns:
  DDPG's pre-squash action, SAC's [mean, log_std]);
- one or two critics (`twin_q`): `critic_hiddens` layers over concat(obs, action), one Q-value;
- for SAC, `log_alpha`, the entropy temperature's logarithm (a trainable scalar), so that every
  variable a learner trains is a model variable (weights, gradients and checkpoints need no
  special case).

`q_values(obs, actions, frozen=True)` runs the critics with their weights wrapped in
`tf.stop_gradient`: the actor's loss differentiates through the critic's *input* (the action)
but must not move the critic, and since one gradient step differentiates the sum of all losses
once, the critic's weights are cut out of the actor's term this way. Only dense stacks can do
this, which is why the critics are plain Dense layers rather than any catalog model.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.models.tf_model import TFModel


def _dense_layers(sizes: Sequence[int], activation: str, prefix: str) -> List[keras.layers.Dense]:
    return [keras.layers.Dense(size, activation=activation, name=f"{prefix}_{i}")
            for i, size in enumerate(sizes)]


class _DenseStack(tf.Module):
    """Dense layers built at construction; callable normally or with stopped weight gradients."""

    def __init__(self, input_size: int, hiddens: Sequence[int], activation: str, outputs: int,
                 name: str, output_init_scale: Optional[float] = None):
        super().__init__(name=name)
        self.layers = _dense_layers(hiddens, activation, name)
        out_init = ("glorot_uniform" if output_init_scale is None
                    else keras.initializers.RandomUniform(-output_init_scale, output_init_scale))
        self.layers.append(keras.layers.Dense(outputs, name=f"{name}_out",
                                              kernel_initializer=out_init))
        inputs = keras.Input(shape=(input_size,))
        x = inputs
        for layer in self.layers:
            x = layer(x)
        self.network = keras.Model(inputs, x, name=name)

    def __call__(self, x, frozen: bool = False):
        if not frozen:
            return self.network(x)
        for layer in self.layers:
            x = layer.activation(tf.matmul(x, tf.stop_gradient(layer.kernel))
                                 + tf.stop_gradient(layer.bias))
        return x


class ActorCriticQModel(TFModel):
    """Actor, twin critics and (optionally) log_alpha; see the module docstring.

    Args beyond TFModel's: actor_hiddens / actor_activation, critic_hiddens /
    critic_activation (dense sizes and activation of each stack), twin_q (a second critic),
    initial_alpha (None: no temperature variable; else log_alpha starts at log(initial_alpha)).
    """

    has_value_branch = False

    def __init__(self, obs_space, action_space, num_outputs, model_config, name="actor_critic",
                 *, actor_hiddens=(256, 256), actor_activation="relu",
                 critic_hiddens=(256, 256), critic_activation="relu", twin_q=True,
                 initial_alpha: Optional[float] = None):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        obs_size = int(np.prod(self.preprocessor.shape))
        action_size = int(np.prod(action_space.shape))
        self.actor = _DenseStack(obs_size, actor_hiddens, actor_activation, num_outputs,
                                 f"{name}_actor")
        self.critics = [_DenseStack(obs_size + action_size, critic_hiddens, critic_activation, 1,
                                    f"{name}_q{i}") for i in range(2 if twin_q else 1)]
        self.log_alpha = None
        if initial_alpha is not None:
            self.log_alpha = tf.Variable(np.log(float(initial_alpha)), dtype=tf.float32,
                                         name=f"{name}_log_alpha")

    def forward(self, input_dict, state, seq_lens):
        return self.actor(input_dict["obs_flat"]), state

    def q_values(self, obs, actions, frozen: bool = False) -> List[tf.Tensor]:
        """[Q_1(s, a), (Q_2(s, a))], each [B], for raw observations and actions [B, dim]."""
        obs_flat = self.preprocessor.tf_transform(obs)
        x = tf.concat([tf.reshape(obs_flat, [tf.shape(obs_flat)[0], -1]),
                       tf.cast(actions, tf.float32)], axis=-1)
        return [tf.squeeze(critic(x, frozen=frozen), axis=-1) for critic in self.critics]

    def actor_variables(self) -> List[tf.Variable]:
        return list(self.actor.network.trainable_variables)

    def critic_variables(self) -> List[tf.Variable]:
        return [v for critic in self.critics for v in critic.network.trainable_variables]

    def alpha_variables(self) -> List[tf.Variable]:
        return [] if self.log_alpha is None else [self.log_alpha]
