"""Classic DQN custom Q models: a DistributionalQTFModel subclass (custom_keras_model.py's
MyKerasQModel) gets the heads DQN's config asks for (dueling, num_atoms, noisy, v_min/v_max),
and distributional DQN's loss projects the target distribution onto the support."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.errors import InvalidConfigError
from tfrl.rllib.agents.dqn import DQNTFPolicy, DQNTrainer
from tfrl.rllib.agents.dqn.distributional_q_tf_model import DistributionalQTFModel
from tfrl.rllib.models import ModelCatalog
from tfrl.rllib.models.tf.layers import NoisyLayer
from tfrl.rllib.models.tf.misc import normc_initializer
from tfrl.rllib.utils.framework import try_import_tf

tf1, tf, tfv = try_import_tf()

OBS = gym.spaces.Box(-1.0, 1.0, (4,))
ACTIONS = gym.spaces.Discrete(2)


class MyKerasQModel(DistributionalQTFModel):
    """custom_keras_model.py's Q model (smaller)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kw):
        super().__init__(obs_space, action_space, num_outputs, model_config, name, **kw)
        self.inputs = tf.keras.layers.Input(shape=obs_space.shape, name="observations")
        layer_1 = tf.keras.layers.Dense(16, name="my_layer1", activation=tf.nn.relu,
                                        kernel_initializer=normc_initializer(1.0))(self.inputs)
        layer_out = tf.keras.layers.Dense(num_outputs, name="my_out", activation=tf.nn.relu,
                                          kernel_initializer=normc_initializer(1.0))(layer_1)
        self.base_model = tf.keras.Model(self.inputs, layer_out)
        self.register_variables(self.base_model.variables)

    def forward(self, input_dict, state, seq_lens):
        return self.base_model(input_dict["obs"]), state

    def metrics(self):
        return {"foo": tf.constant(42.0)}


ModelCatalog.register_custom_model("classic_keras_q_model", MyKerasQModel)


def q_policy(**config):
    base = {"hiddens": [8], "model": {"custom_model": "classic_keras_q_model",
                                      "fcnet_hiddens": [12]}}
    return DQNTFPolicy(OBS, ACTIONS, dict(base, **config))


@pytest.mark.parametrize("options", [
    {"dueling": True, "num_atoms": 1},
    {"dueling": False, "num_atoms": 5, "v_min": -2.0, "v_max": 2.0},
    {"dueling": True, "num_atoms": 3, "noisy": True},
])
def test_the_custom_q_model_gets_the_configured_heads(options):
    policy = q_policy(**options)
    model = policy.model
    assert isinstance(model, MyKerasQModel) and model.num_outputs == 12  # last fcnet size
    assert model.num_atoms == options["num_atoms"] and model.dueling == options["dueling"]
    assert (model.state_value_head is not None) == options["dueling"]
    noisy = any("sigma" in v.name for v in model.variables)
    assert noisy == options.get("noisy", False)
    obs = np.random.default_rng(0).uniform(-1, 1, (6, 4)).astype(np.float32)
    actions, _, _ = policy.compute_actions(obs, explore=False)
    assert actions.shape == (6,) and set(actions) <= {0, 1}
    out = policy.learn_on_batch(_transitions(policy, obs))
    assert np.isfinite(out["total_loss"]) and out["model/foo"] == pytest.approx(42.0)


def _transitions(policy, obs, rewards=None, terminated=None):
    rows = len(obs)
    return {"obs": obs, "new_obs": obs[::-1].copy(), "actions": np.arange(rows) % 2,
            "rewards": np.ones(rows, np.float32) if rewards is None else rewards,
            "terminateds": np.zeros(rows, bool) if terminated is None else terminated,
            "truncateds": np.zeros(rows, bool), "weights": np.ones(rows, np.float32),
            "n_steps": np.ones(rows, np.int64)}


def test_distributional_loss_projects_terminal_rewards_onto_the_support():
    # support [-2, -1, 0, 1, 2]: a terminal reward 1.0 is all on atom 3, 0.5 half on atoms 2
    # and 3, and a reward beyond v_max is clipped onto the last atom
    policy = q_policy(num_atoms=5, v_min=-2.0, v_max=2.0, dueling=False, double_q=False)
    obs = np.random.default_rng(1).uniform(-1, 1, (3, 4)).astype(np.float32)
    rewards = np.array([1.0, 0.5, 7.0], np.float32)
    batch = _transitions(policy, obs, rewards, np.ones(3, bool))
    features, _ = policy.model({"obs": tf.constant(obs)})
    _, logits = policy.model.q_values_and_logits(features)
    log_probs = tf.nn.log_softmax(logits).numpy()[np.arange(3), batch["actions"]]
    expected = -np.array([log_probs[0, 3], 0.5 * (log_probs[1, 2] + log_probs[1, 3]),
                          log_probs[2, 4]])
    td_error = policy.compute_td_error(batch["obs"], batch["actions"], rewards, batch["new_obs"],
                                       batch["terminateds"], batch["weights"],
                                       n_steps=batch["n_steps"])
    np.testing.assert_allclose(td_error, expected, rtol=1e-4, atol=1e-5)


def test_noisy_layers_resample_their_noise():
    layer = NoisyLayer("noisy", 3, 0.5, activation=None)
    x = tf.ones((2, 4))
    first, second = layer(x).numpy(), layer(x).numpy()
    assert not np.allclose(first, second)
    assert {w.name.split("/")[-1].split(":")[0] for w in layer.weights} == {
        "mu_kernel", "sigma_kernel", "mu_bias", "sigma_bias"}


def test_a_plain_custom_model_cannot_take_distributional_heads():
    from tfrl.rllib.models.tf.fcnet import FullyConnectedNetwork

    with pytest.raises(InvalidConfigError, match="DistributionalQTFModel"):
        DQNTFPolicy(OBS, ACTIONS, {"num_atoms": 3,
                                   "model": {"custom_model": FullyConnectedNetwork}})


def test_stock_dqn_with_atoms_and_noise_trains_and_reports_custom_metrics(ray_session):
    config = {"env": "CartPole-v1", "num_workers": 0, "learning_starts": 0,
              "timesteps_per_iteration": 64, "train_batch_size": 16,
              "rollout_fragment_length": 8, "hiddens": [8], "num_atoms": 3, "noisy": True,
              "model": {"custom_model": "classic_keras_q_model", "fcnet_hiddens": [8]}}
    with DQNTrainer(config=config) as trainer:
        result = trainer.train()
    stats = result["info"]["learner"]["default_policy"]
    assert stats["model"]["foo"] == pytest.approx(42.0)
    assert result["info"]["num_steps_trained"] > 0


def test_stock_model_for_atoms_without_a_custom_model():
    policy = DQNTFPolicy(OBS, ACTIONS, {"num_atoms": 4, "hiddens": [8],
                                        "model": {"fcnet_hiddens": [6]}})
    assert type(policy.model).__name__ == "DenseDistributionalQModel"
    assert policy.model.num_outputs == 6
    obs = np.zeros((2, 4), np.float32)
    assert np.isfinite(policy.learn_on_batch(_transitions(policy, obs))["total_loss"])
