"""Chunks: bit-exact round-trips for random nests and dtypes, delta encoding, corruption detection."""

import numpy as np
import pytest
import tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from replay import errors
from replay.chunks import Chunk, decode_column, encode_column, encode_raw_step

DTYPES = ([np.bool_] + [np.dtype(f"{k}{w}") for k in "iu" for w in (1, 2, 4, 8)]
          + [np.float16, np.float32, np.float64, np.complex64, np.complex128, np.dtype("S5"), np.dtype("U3")])


def leaf_arrays(length):
    """A stacked column: `length` steps of a random dtype and step shape."""
    return st.sampled_from(DTYPES).flatmap(
        lambda dtype: hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4).flatmap(
            lambda step_shape: hnp.arrays(np.dtype(dtype), (length,) + step_shape)))


def nests(length):
    leaves = leaf_arrays(length)
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, min_size=1, max_size=3),
            st.dictionaries(st.text("abcxyz", min_size=1, max_size=3), children, min_size=1, max_size=3)),
        max_leaves=6)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), length=st.integers(1, 6), delta=st.booleans(), compress=st.booleans())
def test_random_nests_round_trip_bit_exactly(data, length, delta, compress):
    nest = data.draw(nests(length))
    columns = tree.flatten(nest)
    chunk = Chunk.from_columns(1, columns, delta_encode=delta, compress=compress)
    chunk.validate()
    decoded = chunk.decode()
    assert all(same_bits(np.asarray(a), b) for a, b in zip(columns, decoded))
    rebuilt = tree.unflatten_as(nest, decoded)
    tree.assert_same_structure(nest, rebuilt)
    # Steps are stacked: step i of every leaf is row i of its column.
    # (0-d arrays rather than numpy scalars, which would lose fixed string widths)
    steps = [[np.asarray(c)[i:i + 1].reshape(np.shape(c)[1:]) for c in columns] for i in range(length)]
    from_steps = Chunk.from_steps(2, steps, delta_encode=delta, compress=compress)
    assert all(same_bits(a, b) for a, b in zip(decoded, from_steps.decode()))


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint16, np.uint64])
def test_delta_encoding_is_used_for_integer_columns_of_rank_two_and_wraps_exactly(dtype):
    info = np.iinfo(dtype)
    column = np.array([[info.max, info.min], [info.min, info.max], [0, 1], [info.max, info.max]], dtype)
    encoded = encode_column(column, delta_encode=True)
    assert encoded.delta_encoded
    assert same_bits(decode_column(encoded, 4), column)
    assert not encode_column(column[:, 0], delta_encode=True).delta_encoded  # rank 1: stored as is


def test_smooth_integer_columns_compress_better_with_delta_encoding():
    column = np.cumsum(np.ones((512, 8), np.int64), axis=0) * 1_000_003
    plain, delta = encode_column(column), encode_column(column, delta_encode=True)
    assert len(delta.data) < len(plain.data)
    assert same_bits(decode_column(delta, 512), column)


def test_object_columns_are_rejected():
    with pytest.raises(errors.InvalidArgumentError, match="object"):
        Chunk.from_columns(1, [np.array([["a"], [None]], dtype=object)])


def test_columns_of_different_lengths_are_rejected():
    with pytest.raises(errors.InvalidArgumentError, match="same non-zero number of steps"):
        Chunk.from_columns(1, [np.zeros((3, 2)), np.zeros((4,))])


def test_validate_detects_corrupt_and_truncated_columns():
    chunk = Chunk.from_columns(1, [np.tile(np.arange(4, dtype=np.int32), (100, 1))])
    column = chunk.columns[0]
    assert column.compressed
    flipped = bytearray(column.data)
    flipped[-1] ^= 0xFF
    corrupt = Chunk(1, [column._replace(data=bytes(flipped))], chunk.length)
    with pytest.raises(errors.DataLossError, match="checksum"):
        corrupt.validate()
    truncated_data = column.data[:-5]
    import zlib
    truncated = Chunk(1, [column._replace(data=truncated_data, crc32=zlib.crc32(truncated_data))],
                      chunk.length + 1)
    with pytest.raises(errors.DataLossError, match="need"):
        truncated.validate()


def test_encode_raw_step_is_encode_column_of_one_uncompressed_step():
    for step in (np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(5, dtype=np.int64),
                 np.float64(2.5) * np.ones(()), np.array(b"abc"), np.asfortranarray(np.eye(3))):
        assert encode_raw_step(step) == encode_column(step[np.newaxis], compress=False)
