"""The few names of Reverb's `pybind` module that Python code checks against (`replay.reverb`).

Reverb's pybind layer wraps its C++ objects; the service has none. Only type names and
constants user code commonly tests are given, mapped to the service's classes.
"""
from replay.checkpoint import Checkpointer
from replay.replay_sample import SampleInfo
from replay.selectors import Fifo as FifoSelector
from replay.selectors import Lifo as LifoSelector
from replay.selectors import MaxHeap, MinHeap
from replay.selectors import Prioritized as PrioritizedSelector
from replay.selectors import Uniform as UniformSelector

HeapSelector = (MinHeap, MaxHeap)


class Sampler:
    """Constants of Reverb's sampler."""

    NUM_INFO_TENSORS = len(SampleInfo._fields)


__all__ = ["Checkpointer", "FifoSelector", "HeapSelector", "LifoSelector", "PrioritizedSelector",
           "Sampler", "UniformSelector"]
