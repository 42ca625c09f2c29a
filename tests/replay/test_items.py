"""Items: trajectories over chunk slices, decoding across chunks, validation errors."""
import numpy as np
import pytest

from replay import errors
from replay.items import Item, trajectory_from_chunks


def test_trajectory_across_consecutive_chunks_decodes_the_right_steps(make_chunk):
    first = make_chunk(length=4, start_index=0)
    second = make_chunk(length=4, start_index=4)
    item = Item(1, 1.0, trajectory_from_chunks([first, second], 2, 5), {first.key: first, second.key: second})
    item.validate()
    obs, steps = item.decode()
    assert steps.tolist() == [2, 3, 4, 5, 6]
    assert obs.shape == (5, 3) and obs[:, 0].tolist() == [2, 3, 4, 5, 6]
    assert item.column_specs() == [((5, 3), np.dtype(np.float32)), ((5,), np.dtype(np.int64))]


def test_overlapping_items_share_chunks_and_a_decode_cache(make_chunk):
    chunk = make_chunk(length=6)
    a = Item(1, 1.0, trajectory_from_chunks([chunk], 0, 3), {chunk.key: chunk})
    b = Item(2, 1.0, trajectory_from_chunks([chunk], 2, 3), {chunk.key: chunk})
    assert a.chunks[chunk.key] is b.chunks[chunk.key]
    cache = {}
    assert a.decode(cache)[1].tolist() == [0, 1, 2]
    assert b.decode(cache)[1].tolist() == [2, 3, 4]
    assert len(cache) == 2  # each chunk column decompressed once


def test_squeezed_single_step_column(make_chunk):
    chunk = make_chunk(length=3)
    item = Item(1, 1.0, [(True, ((chunk.key, 2, 1, 1),))], {chunk.key: chunk})
    item.validate()
    assert item.decode()[0] == 2 and item.column_specs() == [((), np.dtype(np.int64))]


@pytest.mark.parametrize("priority", [-1.0, float("nan"), float("inf")])
def test_bad_priority(make_chunk, priority):
    chunk = make_chunk()
    with pytest.raises(errors.InvalidArgumentError, match="priority"):
        Item(1, priority, trajectory_from_chunks([chunk], 0, 1), {chunk.key: chunk}).validate()


def test_unknown_chunk_key_and_bad_slices(make_chunk):
    chunk = make_chunk(length=3)
    chunks = {chunk.key: chunk}
    cases = [
        ([(False, ((999, 0, 1, 0),))], errors.NotFoundError, "chunk 999"),
        ([(False, ((chunk.key, 2, 2, 0),))], errors.InvalidArgumentError, "outside"),
        ([(False, ((chunk.key, 0, 0, 0),))], errors.InvalidArgumentError, "outside"),
        ([(False, ((chunk.key, 0, 1, 5),))], errors.InvalidArgumentError, "column 5"),
        ([(False, ())], errors.InvalidArgumentError, "no chunk slices"),
        ([], errors.InvalidArgumentError, "no columns"),
        ([(False, ((chunk.key, 0, 1, 0), (chunk.key, 0, 1, 1)))],
         errors.InvalidArgumentError, "mixes"),
    ]
    for trajectory, error, match in cases:
        with pytest.raises(error, match=match):
            Item(1, 1.0, trajectory, chunks).validate()
    with pytest.raises(errors.InvalidArgumentError, match="fewer than 5 steps"):
        trajectory_from_chunks([chunk], 1, 5)
