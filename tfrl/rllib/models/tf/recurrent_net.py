"""Classic `ray.rllib.models.tf.recurrent_net`: RecurrentNetwork, the base of custom recurrent
models (forward_rnn over [B, T, ...] inputs; tfrl/models/recurrent.py)."""
from tfrl.models.recurrent import RecurrentNetwork

__all__ = ["RecurrentNetwork"]
