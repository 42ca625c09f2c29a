"""Classic `ray.rllib.models.repeated_values`."""
from tfrl.models.repeated_values import RepeatedValues

__all__ = ["RepeatedValues"]
