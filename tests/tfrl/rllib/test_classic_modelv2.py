"""Classic ModelV2 custom models through the stock policies: a TFModelV2 subclass built with
`tf.keras` from `try_import_tf`, registered with the ModelCatalog, its `custom_model_config`
passed as keywords, its `custom_loss` minimised and its `metrics()` reported in the result
under info/learner/<policy>/model, as classic RLlib 1.x does."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.rllib.agents.a3c import A2CTrainer
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rllib.agents.ppo import PPOTrainer
from tfrl.rllib.agents.ppo.ppo_tf_policy import PPOTFPolicy
from tfrl.rllib.models import ModelCatalog
from tfrl.rllib.models.tf.fcnet import FullyConnectedNetwork
from tfrl.rllib.models.tf.misc import normc_initializer
from tfrl.rllib.models.tf.recurrent_net import RecurrentNetwork
from tfrl.rllib.models.tf.tf_modelv2 import TFModelV2
from tfrl.rllib.utils.framework import try_import_tf

tf1, tf, tfv = try_import_tf()


class KerasModel(TFModelV2):
    """custom_keras_model.py's model, plus a custom loss term and an option by keyword."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name,
                 hidden=16, aux_weight=0.0):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.aux_weight = aux_weight
        inputs = tf.keras.layers.Input(shape=obs_space.shape, name="observations")
        layer_1 = tf.keras.layers.Dense(hidden, activation=tf.nn.relu,
                                        kernel_initializer=normc_initializer(1.0))(inputs)
        layer_out = tf.keras.layers.Dense(num_outputs, name="my_out",
                                          kernel_initializer=normc_initializer(0.01))(layer_1)
        value_out = tf.keras.layers.Dense(1, name="value_out",
                                          kernel_initializer=normc_initializer(0.01))(layer_1)
        self.base_model = tf.keras.Model(inputs, [layer_out, value_out])
        self.register_variables(self.base_model.variables)

    def forward(self, input_dict, state, seq_lens):
        model_out, self._value_out = self.base_model(input_dict["obs"])
        return model_out, state

    def value_function(self):
        return tf.reshape(self._value_out, [-1])

    def custom_loss(self, policy_loss, loss_inputs):
        # reads a batch column of its own, so the column joins the learn signature
        self.aux_loss = tf.reduce_mean(tf.square(self.last_output())) * tf.reduce_mean(
            tf.cast(loss_inputs["rewards"], tf.float32))
        return policy_loss + self.aux_weight * self.aux_loss

    def metrics(self):
        return {"foo": tf.constant(42.0), "aux_loss": self.aux_loss}


ModelCatalog.register_custom_model("classic_keras_model", KerasModel)

SMALL = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 32,
         "train_batch_size": 32}


def model_config(**options):
    return {"custom_model": "classic_keras_model", "custom_model_config": options}


@pytest.mark.parametrize("trainer_cls,extra", [
    (PPOTrainer, {"sgd_minibatch_size": 16, "num_sgd_iter": 2}),
    (PGTrainer, {}),
    (A2CTrainer, {}),
])
def test_custom_model_metrics_reach_the_training_result(ray_session, trainer_cls, extra):
    config = dict(SMALL, model=model_config(hidden=8, aux_weight=0.5), **extra)
    with trainer_cls(config=config) as trainer:
        policy = trainer.get_policy()
        assert isinstance(policy.model, KerasModel)
        assert policy.model.aux_weight == 0.5  # custom_model_config arrived as a keyword
        result = trainer.train()
    stats = result["info"]["learner"]["default_policy"]
    assert stats["model"]["foo"] == pytest.approx(42.0)
    assert np.isfinite(stats["model"]["aux_loss"])


def _policy(aux_weight, **config):
    return PPOTFPolicy(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2),
                       dict(config, model=model_config(aux_weight=aux_weight)))


def _batch(policy, rows=16, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (rows, 4)).astype(np.float32)
    actions, _, extras = policy.compute_actions(obs)
    return {"obs": obs, "actions": actions, "rewards": np.ones(rows, np.float32),
            "advantages": np.zeros(rows, np.float32), "value_targets": np.zeros(rows, np.float32),
            **extras}


def test_the_custom_loss_is_the_loss_the_policy_minimises():
    # same weights and batch: the loss of the learn step is PPO's plus aux_weight * aux_loss,
    # and the model's term moves the gradients
    plain, weighted = _policy(0.0, seed=1), _policy(3.0, seed=1)
    weighted.set_weights(plain.get_weights())
    batch = _batch(plain)
    losses = []
    for policy in (plain, weighted):
        tensors = {k: tf.constant(v) for k, v in policy._prepare_batch(batch).items()}
        loss, stats, _ = policy.loss_and_stats(tensors)
        losses.append((float(loss), float(stats["model/aux_loss"]), float(stats["total_loss"])))
    (plain_loss, _, plain_ppo), (weighted_loss, aux, weighted_ppo) = losses
    assert aux > 0 and plain_ppo == pytest.approx(weighted_ppo, rel=1e-5)
    assert weighted_loss == pytest.approx(plain_loss + 3.0 * aux, rel=1e-4)
    grads_plain, _ = plain.compute_gradients(batch)
    grads_weighted, _ = weighted.compute_gradients(batch)
    assert any(not np.allclose(a, b) for a, b in zip(grads_plain, grads_weighted))
    assert "rewards" in weighted.loss_input_signature  # the column the custom loss read


def test_options_under_the_08_name_custom_options():
    class OptionsModel(KerasModel):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name,
                             hidden=model_config["custom_options"]["hidden"])

    model = ModelCatalog.get_model(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2), 2,
                                   {"custom_model": OptionsModel,
                                    "custom_options": {"hidden": 5}})
    assert model.base_model.layers[1].units == 5


def test_a_custom_model_wrapping_a_catalog_model():
    """custom_loss_model.py's shape: a TFModelV2 holding the stock network, its variables
    registered with `variables()`."""

    class Wrapper(TFModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.fcnet = FullyConnectedNetwork(obs_space, action_space, num_outputs,
                                               model_config, name="fcnet")
            self.register_variables(self.fcnet.variables())

        def forward(self, input_dict, state, seq_lens):
            return self.fcnet(input_dict, state, seq_lens)

        def value_function(self):
            return self.fcnet.value_function()

    ModelCatalog.register_custom_model("classic_wrapper", Wrapper)
    config = dict(SMALL, model={"custom_model": "classic_wrapper", "fcnet_hiddens": [8]},
                  sgd_minibatch_size=16, num_sgd_iter=1)
    with PPOTrainer(config=config) as trainer:
        before = [w.copy() for w in trainer.get_policy().get_weights()]
        trainer.train()
        after = trainer.get_policy().get_weights()
    # policy and value trunks of one layer each, no variable twice
    assert len(before) == 8 and any(not np.allclose(a, b) for a, b in zip(before, after))


def test_a_model_registered_in_the_driver_reaches_a_tune_trial(ray_session):
    """custom_env.py's shape: register_custom_model in the script, then tune.run; the trial's
    trainer runs in another process and finds the name through Ray Tune's registry."""
    from ray import tune

    ModelCatalog.register_custom_model("classic_model_for_tune", KerasModel)
    config = dict(SMALL, model=model_config(hidden=4), sgd_minibatch_size=16, num_sgd_iter=1)
    config["model"]["custom_model"] = "classic_model_for_tune"
    analysis = tune.run("PPO", config=config, stop={"training_iteration": 1}, verbose=0)
    result = analysis.trials[0].last_result
    assert result["info"]["learner"]["default_policy"]["model"]["foo"] == pytest.approx(42.0)


class RNNModel(RecurrentNetwork):
    """examples/models/rnn_model.py's RNNModel (smaller, the mask's length given): an LSTM over
    forward_rnn's inputs."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name,
                 hiddens_size=8, cell_size=4):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.cell_size = cell_size
        input_layer = tf.keras.layers.Input(shape=(None, obs_space.shape[0]), name="inputs")
        state_in_h = tf.keras.layers.Input(shape=(cell_size,), name="h")
        state_in_c = tf.keras.layers.Input(shape=(cell_size,), name="c")
        seq_in = tf.keras.layers.Input(shape=(), name="seq_in", dtype=tf.int32)
        dense1 = tf.keras.layers.Dense(hiddens_size, activation=tf.nn.relu)(input_layer)
        # the mask's length is the padded time dimension: tfrl pads every sequence to
        # max_seq_len (classic RLlib padded to the batch's longest and used sequence_mask(seq_in))
        mask = tf.sequence_mask(seq_in, tf.shape(input_layer)[1])
        lstm_out, state_h, state_c = tf.keras.layers.LSTM(
            cell_size, return_sequences=True, return_state=True)(
                inputs=dense1, mask=mask, initial_state=[state_in_h, state_in_c])
        logits = tf.keras.layers.Dense(self.num_outputs)(lstm_out)
        values = tf.keras.layers.Dense(1)(lstm_out)
        self.rnn_model = tf.keras.Model(
            inputs=[input_layer, seq_in, state_in_h, state_in_c],
            outputs=[logits, values, state_h, state_c])
        self.register_variables(self.rnn_model.variables)

    def forward_rnn(self, inputs, state, seq_lens):
        model_out, self._value_out, h, c = self.rnn_model([inputs, seq_lens] + state)
        return model_out, [h, c]

    def get_initial_state(self):
        return [np.zeros(self.cell_size, np.float32), np.zeros(self.cell_size, np.float32)]

    def value_function(self):
        return tf.reshape(self._value_out, [-1])


def _cartpole_ppo_worker(model_name, model_cls, max_seq_len, sgd_minibatch_size):
    """A classic RolloutWorker of PPOTFPolicy on CartPole with `model_cls` registered as its custom model."""
    from tfrl.rllib.evaluation import RolloutWorker

    ModelCatalog.register_custom_model(model_name, model_cls)
    config = {"model": {"custom_model": model_name, "max_seq_len": max_seq_len},
              "rollout_fragment_length": 40, "sgd_minibatch_size": sgd_minibatch_size, "num_sgd_iter": 1}
    return RolloutWorker(lambda _: gym.make("CartPole-v1"), PPOTFPolicy, config)


def _assert_learn_on_batch_changes_the_weights(policy, batch):
    before = [w.copy() for w in policy.get_weights()]
    stats = policy.learn_on_batch(batch)
    assert np.isfinite(stats["total_loss"])
    assert any(not np.allclose(a, b) for a, b in zip(before, policy.get_weights()))


def test_a_custom_recurrent_network_samples_and_learns():
    worker = _cartpole_ppo_worker("classic_rnn", RNNModel, max_seq_len=5, sgd_minibatch_size=20)
    policy = worker.get_policy()
    assert policy.is_recurrent() and isinstance(policy.model, RNNModel)
    batch = worker.sample()
    assert batch["state_in_0"].shape[1:] == (4,)
    _assert_learn_on_batch_changes_the_weights(policy, batch)


class ClassicMaskRNNModel(RNNModel):
    """rnn_model.py's RNNModel as classic RLlib wrote it: the LSTM's mask is
    `tf.sequence_mask(seq_in)`, as long as the batch's longest sequence."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, cell_size=4):
        RecurrentNetwork.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        self.cell_size = cell_size
        input_layer = tf.keras.layers.Input(shape=(None, obs_space.shape[0]), name="inputs")
        state_in_h = tf.keras.layers.Input(shape=(cell_size,), name="h")
        state_in_c = tf.keras.layers.Input(shape=(cell_size,), name="c")
        seq_in = tf.keras.layers.Input(shape=(), name="seq_in", dtype=tf.int32)
        lstm_out, state_h, state_c = tf.keras.layers.LSTM(
            cell_size, return_sequences=True, return_state=True)(
                inputs=input_layer, mask=tf.sequence_mask(seq_in),
                initial_state=[state_in_h, state_in_c])
        logits = tf.keras.layers.Dense(self.num_outputs)(lstm_out)
        values = tf.keras.layers.Dense(1)(lstm_out)
        self.rnn_model = tf.keras.Model(
            inputs=[input_layer, seq_in, state_in_h, state_in_c],
            outputs=[logits, values, state_h, state_c])
        self.register_variables(self.rnn_model.variables)

    def value_function(self):
        return tf.reshape(self._value_out, [-1])


def test_forward_rnn_sees_the_batch_cut_to_its_longest_sequence_and_rows_come_back_padded():
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    model = ClassicMaskRNNModel(obs_space, gym.spaces.Discrete(2), 2, {"max_seq_len": 5}, "rnn")
    rows = np.random.default_rng(0).uniform(-1, 1, (10, 3)).astype(np.float32)
    seq_lens = np.array([2, 3], np.int32)  # two sequences padded to 5 steps, the longest 3
    zeros = [np.zeros((2, 4), np.float32)] * 2
    outputs, state = model({"obs": rows}, zeros, seq_lens)
    values = model.value_function()
    assert outputs.shape == (10, 2) and values.shape == (10,)
    beyond_the_longest = [3, 4, 8, 9]  # steps 3 and 4 of both sequences
    assert np.all(outputs.numpy()[beyond_the_longest] == 0)
    assert np.all(values.numpy()[beyond_the_longest] == 0)
    # each sequence alone gives the same outputs, values and final state
    for b, length in enumerate(seq_lens):
        alone, alone_state = model({"obs": rows[5 * b:5 * b + length]},
                                   [z[:1] for z in zeros], np.array([length], np.int32))
        np.testing.assert_allclose(outputs.numpy()[5 * b:5 * b + length], alone.numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values.numpy()[5 * b:5 * b + length],
                                   model.value_function().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state[0].numpy()[b], alone_state[0].numpy()[0],
                                   rtol=1e-5, atol=1e-6)


def test_a_classic_masked_recurrent_network_learns_through_a_stock_policy():
    worker = _cartpole_ppo_worker("classic_mask_rnn", ClassicMaskRNNModel, max_seq_len=20, sgd_minibatch_size=40)
    policy = worker.get_policy()
    _assert_learn_on_batch_changes_the_weights(policy, worker.sample())


class ImageRNN(RecurrentNetwork):
    """Records the inputs forward_rnn is given (mobilenet_v2_with_lstm's model reads flat
    image rows: Input(shape=(None, 4 * 4 * 3)))."""

    def forward_rnn(self, inputs, state, seq_lens):
        self.seen_shape = tuple(inputs.shape)
        return tf.zeros([tf.shape(inputs)[0], tf.shape(inputs)[1], self.num_outputs]), state

    def get_initial_state(self):
        return []


def test_image_observations_reach_forward_rnn_as_flat_rows():
    model = ImageRNN(gym.spaces.Box(0.0, 1.0, (4, 4, 3), np.float32), gym.spaces.Discrete(2), 2,
                     {}, "image_rnn")
    outputs, _ = model({"obs": np.zeros((6, 4, 4, 3), np.float32)}, [], np.array([3, 3]))
    assert model.seen_shape == (2, 3, 48) and outputs.shape == (6, 2)


class SeesClassicInputs(TFModelV2):
    """Builds on obs_space.shape[0] (rnn_model.py's RNNModel on RepeatAfterMeEnv's Discrete(2))
    and records the inputs it is called with."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        inputs = tf.keras.layers.Input(shape=(obs_space.shape[0],))
        self.base = tf.keras.Model(inputs, [tf.keras.layers.Dense(num_outputs)(inputs),
                                            tf.keras.layers.Dense(1)(inputs)])
        self.register_variables(self.base.variables)

    def forward(self, input_dict, state, seq_lens):
        self.seen_obs = input_dict["obs"]
        logits, self._value = self.base(input_dict["obs_flat"])
        return logits, state

    def value_function(self):
        return tf.reshape(self._value, [-1])


@pytest.mark.parametrize("space, raw, flat, restored", [
    (gym.spaces.Discrete(3), np.array([2, 0]), [[0, 0, 1], [1, 0, 0]],
     np.array([[0, 0, 1], [1, 0, 0]])),
    (gym.spaces.Dict({"b": gym.spaces.Box(-1.0, 1.0, (2,)), "a": gym.spaces.Discrete(2)}),
     {"a": np.array([1]), "b": np.array([[0.5, -0.5]], np.float32)}, [[0, 1, 0.5, -0.5]],
     {"a": np.array([[0, 1]]), "b": np.array([[0.5, -0.5]])}),
])
def test_a_custom_model_gets_classic_rllibs_preprocessed_space_and_inputs(space, raw, flat,
                                                                          restored):
    ModelCatalog.register_custom_model("sees_classic_inputs", SeesClassicInputs)
    model = ModelCatalog.get_model(space, gym.spaces.Discrete(2), 2,
                                   {"custom_model": "sees_classic_inputs"})
    assert model.obs_space.shape == (len(flat[0]),) and model.obs_space.original_space == space
    logits, _ = model({"obs": raw})
    assert logits.shape == (len(flat), 2)
    tf.nest.map_structure(lambda want, got: np.testing.assert_allclose(got.numpy(), want),
                          restored, model.seen_obs)
    # a stock policy hands it raw observations and learns
    policy = PPOTFPolicy(space, gym.spaces.Discrete(2),
                         {"model": {"custom_model": "sees_classic_inputs"},
                          "sgd_minibatch_size": 4, "num_sgd_iter": 1, "train_batch_size": 4})
    assert policy.model.obs_space.original_space == space
    actions, _, _ = policy.compute_actions(raw)
    assert len(actions) == len(flat)


class TF1LayersBatchNormModel(TFModelV2):
    """batch_norm_model.py's model: TF1 graph layers built in forward under a reused variable
    scope, batch norm in training mode when the model is called on a train batch."""

    def forward(self, input_dict, state, seq_lens):
        with tf1.variable_scope("model", reuse=tf1.AUTO_REUSE):
            hidden = tf1.layers.dense(input_dict["obs"], 8, activation=tf.nn.tanh,
                                      kernel_initializer=normc_initializer(1.0), name="fc0")
            hidden = tf1.layers.batch_normalization(hidden, training=input_dict["is_training"],
                                                    name="bn_0")
            output = tf1.layers.dense(hidden, self.num_outputs, name="out",
                                      kernel_initializer=normc_initializer(0.01))
            self._value_out = tf1.layers.dense(hidden, 1, name="vf")
        self.register_variables(
            tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope=".+/model/.+"))
        return output, []

    def value_function(self):
        return tf.reshape(self._value_out, [-1])


def test_tf1_layers_in_forward_are_created_once_trained_and_synced():
    def policy():
        return PPOTFPolicy(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2),
                           {"model": {"custom_model": TF1LayersBatchNormModel},
                            "sgd_minibatch_size": 16, "num_sgd_iter": 2})

    learner, actor = policy(), policy()
    names = sorted(v.name for v in learner.model.variables)
    assert names == sorted(f"model/{layer}/{var}:0" for layer, var in [
        ("fc0", "kernel"), ("fc0", "bias"), ("bn_0", "gamma"), ("bn_0", "beta"),
        ("bn_0", "moving_mean"), ("bn_0", "moving_variance"), ("out", "kernel"),
        ("out", "bias"), ("vf", "kernel"), ("vf", "bias")])
    assert len(learner.model.trainable_variables) == 8  # not the moving statistics
    moving_mean = next(v for v in learner.model.variables if "moving_mean" in v.name)

    batch = _batch(learner, rows=32)
    batch["advantages"] = np.linspace(-1.0, 1.0, 32).astype(np.float32)
    mean_before = moving_mean.numpy().copy()
    learner.compute_actions(batch["obs"])  # acting: batch norm in inference mode
    np.testing.assert_array_equal(moving_mean.numpy(), mean_before)
    _assert_learn_on_batch_changes_the_weights(learner, batch)
    assert sorted(v.name for v in learner.model.variables) == names  # reused, none added
    assert not np.allclose(moving_mean.numpy(), mean_before)  # training mode on the train batch

    actor.set_weights(learner.get_weights())
    obs = batch["obs"][:5]
    learner_logits = learner.model({"obs": tf.constant(obs)})[0].numpy()
    np.testing.assert_allclose(actor.model({"obs": tf.constant(obs)})[0].numpy(),
                               learner_logits, rtol=1e-5, atol=1e-6)
