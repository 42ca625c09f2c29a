"""Classic `ray.rllib.models.utils`: `get_activation_fn` (its place in Ray 1.x)."""
from tfrl.models.layer_helpers import get_activation_fn

__all__ = ["get_activation_fn"]
