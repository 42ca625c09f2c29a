"""Classic `ray.rllib.models.tf.layers`: NoisyLayer, tfrl's NoisyDense (a Keras layer with
factorised Gaussian weight noise), and the transformer layers of classic RLlib's attention nets:
GRUGate (tfrl/models/gru_gate.py), SkipConnection (tfrl/models/skip_connection.py),
MultiHeadAttention and RelativeMultiHeadAttention (tfrl/models/multi_head_attention.py).
Classic RLlib's 1.x constructor order `NoisyLayer(prefix, out_size, sigma0, activation="relu")`
is accepted."""
from tfrl.agents.dqn.distributional_q_model import NoisyDense
from tfrl.models.gru_gate import GRUGate
from tfrl.models.multi_head_attention import MultiHeadAttention, RelativeMultiHeadAttention
from tfrl.models.skip_connection import SkipConnection


def NoisyLayer(prefix: str, out_size: int, sigma0: float, activation="relu"):
    """A NoisyDense of `out_size` units named `prefix` (classic constructor order)."""
    return NoisyDense(out_size, sigma0, activation=activation, name=prefix.replace("/", "_"))


__all__ = ["GRUGate", "MultiHeadAttention", "NoisyDense", "NoisyLayer",
           "RelativeMultiHeadAttention", "SkipConnection"]
