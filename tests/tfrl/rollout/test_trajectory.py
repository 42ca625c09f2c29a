"""The row-stacking helper the env runners build observation batches with."""
import numpy as np
import pytest

from tfrl.utils.rows import stack_rows


@pytest.mark.parametrize("rows", [
    [np.arange(4, dtype=np.float32) + i for i in range(32)],
    (np.zeros((2, 3), np.uint8), np.ones((2, 3), np.uint8)),
    [np.float32(1.5), np.float32(2.5)],
    [np.zeros(2, np.float32), np.ones(2, np.float64)],
    [np.zeros(2, np.int64), [1, 2]],
])
def test_stack_rows_equals_np_stack(rows):
    out, expected = stack_rows(rows), np.stack(rows)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


def test_stack_rows_of_ragged_rows_raises_like_np_stack():
    with pytest.raises(ValueError):
        stack_rows([np.zeros(2), np.zeros(3)])
    assert stack_rows([{"a": np.zeros(2)}, {"a": np.ones(2)}])["a"].shape == (2, 2)
    np.testing.assert_array_equal(stack_rows([1, 2]), [1, 2])
