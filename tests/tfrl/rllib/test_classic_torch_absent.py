"""Module paths classic RLlib imports without torch installed: the torch policies' names
import and derive but refuse construction with an ImportError, and the TF model helpers of
`models.tf.misc` / `models.utils` work on tfrl's models."""
import importlib

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfrl.errors import FrameworkNotAvailableError, InvalidConfigError

TORCH_POLICIES = [
    ("dqn", "dqn_torch_policy", "DQNTorchPolicy", "DQNTFPolicy", True),
    ("dqn", "simple_q_torch_policy", "SimpleQTorchPolicy", "SimpleQTFPolicy", True),
    ("pg", "pg_torch_policy", "PGTorchPolicy", "PGTFPolicy", True),
    ("ppo", "ppo_torch_policy", "PPOTorchPolicy", "PPOTFPolicy", True),
    ("ppo", "appo_torch_policy", "AsyncPPOTorchPolicy", "AsyncPPOTFPolicy", False),
    ("a3c", "a3c_torch_policy", "A3CTorchPolicy", "A3CTFPolicy", False),
    ("sac", "sac_torch_policy", "SACTorchPolicy", "SACTFPolicy", True),
    ("ddpg", "ddpg_torch_policy", "DDPGTorchPolicy", "DDPGTFPolicy", False),
    ("marwil", "marwil_torch_policy", "MARWILTorchPolicy", "MARWILTFPolicy", True),
    ("impala", "vtrace_torch_policy", "VTraceTorchPolicy", "VTraceTFPolicy", False),
]


@pytest.mark.parametrize("agent, module, name, tf_name, in_package", TORCH_POLICIES,
                         ids=[p[2] for p in TORCH_POLICIES])
def test_torch_policy_names_import_and_refuse_construction(agent, module, name, tf_name,
                                                           in_package):
    cls = getattr(importlib.import_module(f"tfrl.rllib.agents.{agent}.{module}"), name)
    if in_package:
        assert getattr(importlib.import_module(f"tfrl.rllib.agents.{agent}"), name) is cls
    env = gym.make("CartPole-v1")
    with pytest.raises(ImportError, match=f"{name} is a torch policy.*use {tf_name}"):
        cls(env.observation_space, env.action_space, {})


def test_a_torch_variant_derived_at_import_time_refuses_construction_too():
    from tfrl.rllib.agents.ppo import PPOTorchPolicy

    variant = PPOTorchPolicy.with_updates(name="CCPPOTorchPolicy", loss_fn=lambda *a: 0.0)
    assert variant.__name__ == "CCPPOTorchPolicy" and variant is not PPOTorchPolicy
    with pytest.raises(FrameworkNotAvailableError, match="CCPPOTorchPolicy.*use PPOTFPolicy"):
        variant(None, None, {})


def test_activation_functions_by_config_name():
    from tfrl.rllib.models.tf.misc import get_activation_fn
    from tfrl.rllib.models.utils import get_activation_fn as get_activation_fn_1x

    assert get_activation_fn_1x is get_activation_fn
    x = tf.constant([-1.0, 0.5])
    np.testing.assert_allclose(get_activation_fn("relu")(x), [0.0, 0.5])
    np.testing.assert_allclose(get_activation_fn("tanh", framework="tf2")(x), np.tanh([-1.0, 0.5]),
                               rtol=1e-6)
    assert get_activation_fn("silu") is tf.nn.swish
    assert get_activation_fn("linear") is None and get_activation_fn(None) is None
    with pytest.raises(InvalidConfigError, match="unknown activation 'relu6x'"):
        get_activation_fn("relu6x")
    with pytest.raises(InvalidConfigError, match="framework 'torch' is not available"):
        get_activation_fn("relu", framework="torch")


def test_normc_initializer_gives_columns_of_norm_std_in_a_keras_layer():
    from tfrl.rllib.models.tf.misc import flatten, normc_initializer

    np.random.seed(3)
    layer = keras.layers.Dense(5, kernel_initializer=normc_initializer(0.5))
    layer.build((None, 40))
    kernel = layer.kernel.numpy()
    np.testing.assert_allclose(np.linalg.norm(kernel, axis=0), [0.5] * 5, rtol=1e-5)
    assert np.std(kernel) > 0.01  # random draws, not a constant
    np.random.seed(3)
    np.testing.assert_array_equal(normc_initializer(0.5)((40, 5)).numpy(), kernel)  # seeded
    assert flatten(tf.zeros([2, 3, 4])).shape == (2, 12)


def test_a_torch_recurrent_model_overriding_forward_rnn_is_defined_at_import_time():
    # examples/models/rnn_model.py defines TorchRNNModel next to its TF model
    from tfrl.rllib.models.modelv2 import ModelV2
    from tfrl.rllib.models.torch.recurrent_net import RecurrentNetwork as TorchRNN
    from tfrl.rllib.utils.annotations import override
    from tfrl.rllib.utils.framework import try_import_torch

    _, nn = try_import_torch()

    class TorchRNNModel(TorchRNN, nn.Module):
        @override(ModelV2)
        def get_initial_state(self):
            return []

        @override(TorchRNN)
        def forward_rnn(self, inputs, state, seq_lens):
            return inputs, state

    env = gym.make("CartPole-v1")
    with pytest.raises(ImportError, match="torch"):
        TorchRNNModel(env.observation_space, env.action_space, 2, {}, "rnn")


def test_torch_side_names_of_classic_example_scripts_import():
    """parametric_actions_cartpole.py's model module and centralized_critic.py import these
    beside their TF counterparts; torch models refuse construction, torch functions raise."""
    from tfrl.rllib.agents.dqn.dqn_torch_model import DQNTorchModel
    from tfrl.rllib.agents.ppo.ppo_torch_policy import (KLCoeffMixin, PPOTorchPolicy,
                                                        ValueNetworkMixin, ppo_surrogate_loss)
    from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2

    class TorchParametricActionsModel(DQNTorchModel):  # defined at import time, as classic
        pass

    assert issubclass(DQNTorchModel, TorchModelV2)
    with pytest.raises(FrameworkNotAvailableError, match="TorchParametricActionsModel is a torch"):
        TorchParametricActionsModel(None, None, 2, {}, "pa")
    with pytest.raises(FrameworkNotAvailableError, match="torch"):
        ppo_surrogate_loss(None, None, None, None)
    assert ppo_surrogate_loss.__name__ == "ppo_surrogate_loss"

    class CentralizedValueMixin:
        pass

    # a torch variant with the torch mixins, derived at import time
    variant = PPOTorchPolicy.with_updates(
        name="CCPPOTorchPolicy", mixins=[KLCoeffMixin, ValueNetworkMixin, CentralizedValueMixin])
    with pytest.raises(FrameworkNotAvailableError, match="CCPPOTorchPolicy"):
        variant(None, None, {})


def test_make_tf_callable_runs_the_function_eagerly():
    from tfrl.errors import NotSupportedError
    from tfrl.rllib.utils.tf_ops import make_tf_callable

    central_value = make_tf_callable(None)(lambda obs, other: tf.reduce_sum(obs * other, axis=1))
    np.testing.assert_allclose(central_value(np.ones((2, 3), np.float32),
                                             np.full((2, 3), 2.0, np.float32)), [6.0, 6.0])
    with pytest.raises(NotSupportedError, match="no TF1 session"):
        make_tf_callable(object())
