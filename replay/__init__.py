"""replay: a Reverb-style experience replay service.

Experience is stored once as compressed chunks (`chunks`), tables of items reference them
(`table`), selectors choose what is sampled and evicted (`selectors`), rate limiters control
how fast data flows (`rate_limiters`), a gRPC server (`server`) serves the tables to writers and
samplers (`client`, `writer`, `trajectory_writer`), and learners read through a tf.data dataset
(`dataset.ReplayDataset`, the only module that imports TensorFlow; it is imported lazily).
"""
import os

# `tf.keras` as Reverb's users had it on TensorFlow 2.15 (Keras 2, tf_keras), when TensorFlow
# is imported after replay: TensorFlow's documented switch, which also leaves Keras 3
# unimported. A user's own setting, or TensorFlow imported first, wins.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from replay import errors, extensions, rate_limiters, selectors
from replay.checkpoint import Checkpointer
from replay.chunk_store import ChunkStore
from replay.client import Client, connect
from replay.config import load_tables
from replay.extensions import PriorityDiffusionExtension, StatisticsExtension
from replay.protocol import PROTOCOL_VERSION
from replay.rate_limiters import MinSize, Queue, SampleToInsertRatio, Stack
from replay.replay_sample import ReplaySample, SampleInfo
from replay.selectors import Fifo, Lifo, MaxHeap, MinHeap, Prioritized, Uniform
from replay.server import Server
from replay.sharded_client import ShardedClient
from replay.specs import TensorSpec
from replay.table import SampledItem, Table
from replay.table_info import TableInfo
from replay.trajectory_columns import CellRef, TrajectoryColumn
from replay.trajectory_writer import TrajectoryWriter
from replay.writer import Writer


def __getattr__(name):
    # ReplayDataset needs TensorFlow; import it only when asked for.
    if name == "ReplayDataset":
        from replay.dataset import ReplayDataset

        return ReplayDataset
    raise AttributeError(f"module 'replay' has no attribute {name!r}")


__all__ = [
    "CellRef", "Checkpointer", "ChunkStore", "PROTOCOL_VERSION", "load_tables", "Client",
    "Fifo", "Lifo", "MaxHeap", "MinHeap", "MinSize",
    "Prioritized", "PriorityDiffusionExtension", "Queue", "ReplayDataset", "ReplaySample",
    "SampleInfo", "SampleToInsertRatio", "SampledItem", "Server", "ShardedClient", "Stack", "StatisticsExtension",
    "Table", "TableInfo", "TensorSpec", "TrajectoryColumn", "TrajectoryWriter", "Uniform", "Writer", "connect",
    "errors", "extensions", "rate_limiters", "selectors",
]
