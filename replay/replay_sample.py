"""What `Client.sample` yields: `ReplaySample(info, data)` with `SampleInfo` (Reverb's names).

`info` describes the sampled item at the moment it was sampled; `data` is the item's content as
a nest of numpy arrays (the table signature's structure when the table has one, else a flat
list of columns).
"""
from __future__ import annotations

import collections

SampleInfo = collections.namedtuple(
    "SampleInfo", ["key", "probability", "table_size", "priority", "times_sampled"])
SampleInfo.__doc__ = """Key, sampling probability, table size, priority and times_sampled (after
this sample) of a sampled item, as the table saw them when it sampled the item."""

ReplaySample = collections.namedtuple("ReplaySample", ["info", "data"])
ReplaySample.__doc__ = """One sampled item: `info` (a SampleInfo) and `data` (nest of arrays)."""
