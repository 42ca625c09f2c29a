"""The parameter shards' numpy optimizer steps against the tf_keras optimizers they repeat."""
import numpy as np
import pytest
import tf_keras as keras

from tfrl.optimizers.sharded_ps_optimizer import ParameterShard
from tfrl.optimizers.slice_optimizers import slice_optimizer

OPTIMIZERS = [
    keras.optimizers.SGD(0.1),
    keras.optimizers.SGD(0.05, momentum=0.9),
    keras.optimizers.SGD(0.05, momentum=0.8, nesterov=True),
    keras.optimizers.Adam(0.01),
    keras.optimizers.Adam(0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-5, amsgrad=True),
    keras.optimizers.RMSprop(0.01),
    keras.optimizers.RMSprop(0.01, rho=0.95, momentum=0.5, centered=True),
]


@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=lambda o: str(o.get_config()))
def test_numpy_steps_equal_the_keras_optimizer_and_keep_its_state_layout(optimizer):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    start = rng.normal(size=37).astype(np.float32)
    grads = [rng.normal(size=37).astype(np.float32) for _ in range(6)]
    serialized = keras.optimizers.serialize(optimizer)

    variable = tf.Variable(start)
    optimizer.build([variable])
    shard = ParameterShard(start, serialized)
    assert shard._numpy is not None  # the numpy path, not the tf_keras fallback
    for grad in grads:
        optimizer.apply_gradients([(tf.constant(grad), variable)])
        np.testing.assert_allclose(shard.push(grad), variable.numpy(), rtol=2e-5, atol=1e-7)

    state = shard.get_state()
    keras_state = [v.numpy() for v in optimizer.variables]
    assert len(state["optimizer"]) == len(keras_state)
    assert int(state["optimizer"][0]) == int(keras_state[0]) == len(grads)
    for mine, theirs in zip(state["optimizer"][1:], keras_state[1:]):
        np.testing.assert_allclose(mine, theirs, rtol=2e-5, atol=1e-7)

    # a shard restored from the state continues as the keras optimizer does
    restored = ParameterShard(np.zeros_like(start), serialized)
    restored.set_state(state)
    grad = rng.normal(size=37).astype(np.float32)
    optimizer.apply_gradients([(tf.constant(grad), variable)])
    np.testing.assert_allclose(restored.push(grad), variable.numpy(), rtol=2e-5, atol=1e-7)


def test_optimizers_numpy_does_not_repeat_fall_back_to_tf_keras():
    start = np.arange(5, dtype=np.float32)
    for optimizer in (keras.optimizers.Adagrad(0.1), keras.optimizers.Adam(0.1, clipnorm=1.0),
                      keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(
                          0.1, decay_steps=10, decay_rate=0.5))):
        serialized = keras.optimizers.serialize(optimizer)
        assert slice_optimizer(serialized, 5) is None
        shard = ParameterShard(start, serialized)
        assert shard._numpy is None
        moved = shard.push(np.ones(5, np.float32))
        assert np.all(moved < start)  # the tf_keras optimizer stepped against the gradient
        assert int(shard.get_state()["optimizer"][0]) == 1


def test_a_state_of_another_layout_is_refused():
    shard = ParameterShard(np.zeros(3, np.float32),
                           keras.optimizers.serialize(keras.optimizers.Adam(0.1)))
    with pytest.raises(ValueError, match="iterations, m, v"):
        shard.set_state({"values": np.zeros(3, np.float32), "optimizer": [np.int64(1)]})
