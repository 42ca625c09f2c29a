"""Reverb's `item_selectors` module: the service's selectors under Reverb's names (`replay.reverb`)."""
from replay.selectors import Fifo, ItemSelector, Lifo, MaxHeap, MinHeap, Prioritized, Uniform

__all__ = ["Fifo", "ItemSelector", "Lifo", "MaxHeap", "MinHeap", "Prioritized", "Uniform"]
