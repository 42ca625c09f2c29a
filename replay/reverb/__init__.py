"""replay.reverb: Reverb 0.14's public Python API over the replay service.

`import replay.reverb as reverb` is the whole port for code written against dm-reverb: the
same names and submodules (`client`, `server`, `errors`, `item_selectors`, `rate_limiters`,
`trajectory_writer`, `structured_writer`, `trajectory_dataset`, `timestep_dataset`,
`pattern_dataset`, `tf_client`, `checkpointers`, `replay_sample`), as thin adapters over
`replay`'s own server, wire protocol, writers, datasets and checkpoints. Where the service
deliberately differs from Reverb (loopback by default, named errors, its checkpoint format),
README's "Coming from Reverb" lists it.
"""
from replay.reverb import checkpointers, errors, item_selectors, rate_limiters
from replay.reverb import item_selectors as selectors
from replay.reverb.client import Client, Writer
from replay.reverb.errors import DeadlineExceededError, ReverbError
from replay.reverb.replay_sample import ReplaySample, SampleInfo
from replay.reverb.reverb_types import TableInfo
from replay.reverb.server import Server, Table
from replay.reverb.trajectory_writer import TrajectoryColumn, TrajectoryWriter

_LAZY = {
    # These import TensorFlow (or the structured writer); load them when first used.
    "TrajectoryDataset": ("replay.reverb.trajectory_dataset", "TrajectoryDataset"),
    "TimestepDataset": ("replay.reverb.timestep_dataset", "TimestepDataset"),
    "PatternDataset": ("replay.reverb.pattern_dataset", "PatternDataset"),
    "TFClient": ("replay.reverb.tf_client", "TFClient"),
    "structured": ("replay.reverb.structured_writer", None),
    "structured_writer": ("replay.reverb.structured_writer", None),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        module = importlib.import_module(module_name)
        return module if attribute is None else getattr(module, attribute)
    raise AttributeError(f"module 'replay.reverb' has no attribute {name!r}")


__all__ = ["Client", "DeadlineExceededError", "PatternDataset", "ReplaySample", "ReverbError", "SampleInfo",
           "Server", "TFClient", "Table", "TableInfo", "TimestepDataset", "TrajectoryColumn",
           "TrajectoryDataset", "TrajectoryWriter", "Writer", "checkpointers", "errors", "item_selectors",
           "rate_limiters", "selectors", "structured", "structured_writer"]
