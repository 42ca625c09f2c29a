"""Classic `ray.rllib.offline`: the JSON output writer over tfrl's own (tfrl/offline)."""
from tfrl.rllib.offline.json_writer import JsonWriter

__all__ = ["JsonWriter"]
