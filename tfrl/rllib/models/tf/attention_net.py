"""Classic `ray.rllib.models.tf.attention_net`: GTrXLNet (the gated transformer-XL) and TrXLNet,
recurrent transformer models for custom_model (tfrl/models/attention.py)."""
from tfrl.models.attention import GTrXLNet, PositionwiseFeedforward, TrXLNet
from tfrl.models.multi_head_attention import relative_position_embedding

__all__ = ["GTrXLNet", "PositionwiseFeedforward", "TrXLNet", "relative_position_embedding"]
