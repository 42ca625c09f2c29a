"""Reverb's `replay_sample` module: `ReplaySample` and `SampleInfo` of the service (`replay.reverb`)."""
from replay.replay_sample import ReplaySample, SampleInfo

__all__ = ["ReplaySample", "SampleInfo"]
