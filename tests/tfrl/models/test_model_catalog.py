"""Preprocessors, catalog models (fully connected, vision, LSTM) and custom model registration."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tfrl.errors import InvalidConfigError, UnknownModelError, UnsupportedSpaceError
from tfrl.models import (FullyConnectedNetwork, LSTMWrapper, ModelCatalog, TFModel,
                         VisionNetwork, get_preprocessor)

DISCRETE2 = gym.spaces.Discrete(2)


def _tf_and_np_agree(space, n=5):
    pre = ModelCatalog.get_preprocessor(space)
    samples = [space.sample() for _ in range(n)]
    batch = tf.nest.map_structure(lambda *xs: np.stack(xs), *samples)
    out = pre.tf_transform(tf.nest.map_structure(tf.constant, batch)).numpy()
    expected = np.stack([pre.transform(s) for s in samples])
    np.testing.assert_allclose(out, expected)
    assert out.shape == (n, *pre.shape)
    return pre, samples, out


def test_discrete_is_one_hot():
    space = gym.spaces.Discrete(4, start=2)
    pre = ModelCatalog.get_preprocessor(space)
    np.testing.assert_array_equal(pre.transform(3), [0, 1, 0, 0])
    _tf_and_np_agree(space)


def test_multidiscrete_dict_and_tuple_flatten():
    md = gym.spaces.MultiDiscrete([2, 3])
    pre = ModelCatalog.get_preprocessor(md)
    np.testing.assert_array_equal(pre.transform(np.array([1, 2])), [0, 1, 0, 0, 1])
    _tf_and_np_agree(md)
    space = gym.spaces.Dict({"z": gym.spaces.Discrete(3), "a": gym.spaces.Box(-1, 1, (2, 2)),
                             "t": gym.spaces.Tuple((md, gym.spaces.MultiBinary(2)))})
    pre, samples, out = _tf_and_np_agree(space)
    assert pre.shape == (4 + 5 + 2 + 3,)
    # keys in sorted order: a (4 floats) first, z (one-hot 3) last
    np.testing.assert_allclose(out[0, :4], np.asarray(samples[0]["a"]).reshape(-1))
    assert out[0, -3:].sum() == 1.0


def test_images_keep_their_shape_and_unsupported_spaces_are_named():
    image = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert ModelCatalog.get_preprocessor(image).shape == (84, 84, 4)
    with pytest.raises(UnsupportedSpaceError):
        get_preprocessor(gym.spaces.Text(5))
    with pytest.raises(UnsupportedSpaceError):
        ModelCatalog.get_model(gym.spaces.Box(0, 1, (3, 3)), DISCRETE2, 2, {})


def test_fcnet_shared_vs_separate_value_layers():
    obs = gym.spaces.Box(-1, 1, (3,))
    shared = ModelCatalog.get_model(obs, DISCRETE2, 2, {"fcnet_hiddens": [6, 5],
                                                        "vf_share_layers": True})
    separate = ModelCatalog.get_model(obs, DISCRETE2, 2, {"fcnet_hiddens": [6, 5]})
    assert isinstance(shared, FullyConnectedNetwork)
    count = lambda m: sum(int(np.prod(v.shape)) for v in m.trainable_variables)  # noqa: E731
    # trunk 3*6+6 + 6*5+5 = 59; logits 5*2+2 = 12; value head 5+1 = 6; second trunk 59
    assert count(shared) == 59 + 12 + 6 and count(separate) == 59 + 12 + 6 + 59
    x = tf.constant(np.random.default_rng(0).normal(size=(7, 3)), tf.float32)
    out, state = separate({"obs": x})
    assert out.shape == (7, 2) and state == [] and separate.value_function().shape == (7,)
    with pytest.raises(InvalidConfigError, match="fcnet_hidens"):
        ModelCatalog.get_model(obs, DISCRETE2, 2, {"fcnet_hidens": [4]})


def test_vision_network_on_84x84x4_frames():
    image = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    model = ModelCatalog.get_model(image, DISCRETE2, 6, {
        "conv_filters": [[4, [8, 8], 4], [8, [4, 4], 2]], "post_fcnet_hiddens": [16]})
    assert isinstance(model, VisionNetwork)
    frames = np.random.default_rng(0).integers(0, 255, (3, 84, 84, 4), dtype=np.uint8)
    out, _ = model({"obs": tf.constant(frames)})
    assert out.shape == (3, 6) and model.value_function().shape == (3,)
    kernel = model.base_model.get_layer("conv_0").kernel
    assert kernel.shape == (8, 8, 4, 4)


def test_lstm_ignores_padding_and_carries_state():
    obs_space = gym.spaces.Box(-1, 1, (3,))
    model = ModelCatalog.get_model(obs_space, DISCRETE2, 2, {
        "fcnet_hiddens": [4], "use_lstm": True, "lstm_cell_size": 5})
    assert isinstance(model, LSTMWrapper) and model.is_recurrent()
    rng = np.random.default_rng(0)
    seq = rng.normal(size=(3, 3)).astype(np.float32)
    h0 = [tf.zeros([1, 5]), tf.zeros([1, 5])]
    # one sequence of 3 real steps, padded to 5 with garbage
    padded = np.concatenate([seq, rng.normal(size=(2, 3)).astype(np.float32)])
    out_padded, state_padded = model({"obs": tf.constant(padded)}, h0, tf.constant([3]))
    out_real, state_real = model({"obs": tf.constant(seq)}, h0, tf.constant([3]))
    np.testing.assert_allclose(out_padded.numpy()[:3], out_real.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state_padded[0].numpy(), state_real[0].numpy(), rtol=1e-5)
    # stepping one at a time with the returned state gives the same as the whole sequence
    state = h0
    for t in range(3):
        step_out, state = model({"obs": tf.constant(seq[t:t + 1])}, state, tf.constant([1]))
    np.testing.assert_allclose(step_out.numpy()[0], out_real.numpy()[2], rtol=1e-5, atol=1e-6)


class TinyCustomModel(TFModel):
    has_value_branch = True

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        scale = model_config["custom_model_config"].get("scale", 1.0)
        inputs = keras.Input(shape=self.preprocessor.shape)
        self.net = keras.Model(inputs, [keras.layers.Dense(num_outputs)(inputs) * scale,
                                        keras.layers.Dense(1)(inputs)])

    def forward(self, input_dict, state, seq_lens):
        out, self._v = self.net(input_dict["obs_flat"])
        return out, state

    def value_function(self):
        return tf.reshape(self._v, [-1])


def test_custom_model_registration():
    ModelCatalog.register_custom_model("tiny_custom", TinyCustomModel)
    obs = gym.spaces.Box(-1, 1, (3,))
    model = ModelCatalog.get_model(obs, DISCRETE2, 2, {
        "custom_model": "tiny_custom", "custom_model_config": {"scale": 0.0}})
    assert isinstance(model, TinyCustomModel)
    out, _ = model({"obs": tf.ones([2, 3])})
    np.testing.assert_array_equal(out.numpy(), np.zeros((2, 2)))
    by_class = ModelCatalog.get_model(obs, DISCRETE2, 2, {"custom_model": TinyCustomModel})
    assert isinstance(by_class, TinyCustomModel)
    with pytest.raises(UnknownModelError, match="register_custom_model"):
        ModelCatalog.get_model(obs, DISCRETE2, 2, {"custom_model": "never_registered"})
    with pytest.raises(InvalidConfigError):
        ModelCatalog.register_custom_model("bad", dict)


def test_a_model_built_directly_takes_the_catalog_defaults_and_refuses_unknown_keys():
    # MODEL_DEFAULTS is the one source of the model section's defaults, also without the catalog.
    from tfrl.models import MODEL_DEFAULTS

    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    model = FullyConnectedNetwork(obs_space, gym.spaces.Discrete(2), 2, {"fcnet_hiddens": [8]})
    assert model.model_config["fcnet_activation"] == MODEL_DEFAULTS["fcnet_activation"]
    assert [v.shape.as_list() for v in model.trainable_variables if "fc_0" in v.name][0] == [3, 8]
    with pytest.raises(InvalidConfigError, match="fcnet_hidens"):
        FullyConnectedNetwork(obs_space, gym.spaces.Discrete(2), 2, {"fcnet_hidens": [8]})


@pytest.mark.parametrize("hidden_gain,value_gain", [(2 ** 0.5, 1.0), (0.5, 3.0)])
def test_fcnet_layers_start_orthogonal_with_the_configured_gains(hidden_gain, value_gain):
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    model = ModelCatalog.get_model(space, gym.spaces.Discrete(2), 2, {
        "fcnet_hiddens": [16, 16], "fcnet_init_gain": hidden_gain,
        "value_out_init_gain": value_gain})
    layers = {layer.name: layer.get_weights()[0] for layer in model.base_model.layers
              if layer.get_weights()}
    for name in ("fc_0", "fc_value_0"):  # 4 x 16: orthonormal rows times the gain
        kernel = layers[name]
        np.testing.assert_allclose(kernel @ kernel.T, hidden_gain ** 2 * np.eye(4), atol=1e-5)
    for name in ("fc_1", "fc_value_1"):  # 16 x 16: an orthogonal matrix times the gain
        kernel = layers[name]
        np.testing.assert_allclose(kernel.T @ kernel, hidden_gain ** 2 * np.eye(16), atol=1e-5)
    assert np.linalg.norm(layers["value_out"]) == pytest.approx(value_gain, rel=1e-5)
    assert np.abs(layers["fc_out"]).max() < 0.1  # the policy output starts near uniform
