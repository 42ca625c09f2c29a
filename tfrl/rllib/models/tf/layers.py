"""Classic `ray.rllib.models.tf.layers`: NoisyLayer, tfrl's NoisyDense (a Keras layer with
factorised Gaussian weight noise). Classic RLlib's 1.x constructor order
`NoisyLayer(prefix, out_size, sigma0, activation="relu")` is accepted."""
from tfrl.agents.dqn.distributional_q_model import NoisyDense


def NoisyLayer(prefix: str, out_size: int, sigma0: float, activation="relu"):
    """A NoisyDense of `out_size` units named `prefix` (classic constructor order)."""
    return NoisyDense(out_size, sigma0, activation=activation, name=prefix.replace("/", "_"))


__all__ = ["NoisyLayer", "NoisyDense"]
