"""Helpers for the replay core tests: small real chunks and items built from numpy data."""
import itertools

import numpy as np
import pytest

from replay.chunks import Chunk
from replay.items import Item, trajectory_from_chunks

_chunk_keys = itertools.count(1_000_000)


def build_chunk(length=4, episode_id=0, start_index=0, key=None, columns=None):
    """A chunk of `length` steps with an observation column (float32, shape (3,)) and an action
    column (int64 scalar) whose values encode the step, so decoded data can be checked."""
    if columns is None:
        steps = np.arange(start_index, start_index + length)
        columns = [np.stack([np.full(3, s, np.float32) for s in steps]), steps.astype(np.int64)]
    return Chunk.from_columns(next(_chunk_keys) if key is None else key, columns, episode_id=episode_id,
                              start_index=start_index)


def build_item(key, priority=1.0, chunk=None, offset=0, length=1, **chunk_kwargs):
    """An item over `length` steps of `chunk` (a fresh chunk when None)."""
    chunk = build_chunk(**chunk_kwargs) if chunk is None else chunk
    return Item(key, priority, trajectory_from_chunks([chunk], offset, length), {chunk.key: chunk})


@pytest.fixture
def make_chunk():
    return build_chunk


@pytest.fixture
def make_item():
    return build_item


@pytest.fixture
def shared_chunk():
    return build_chunk(length=8)
