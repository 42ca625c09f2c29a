"""Classic `ray.rllib.offline`: the JSON output writer and input reader over tfrl's own
(tfrl/offline)."""
from tfrl.rllib.offline.json_reader import JsonReader
from tfrl.rllib.offline.json_writer import JsonWriter

__all__ = ["JsonReader", "JsonWriter"]
