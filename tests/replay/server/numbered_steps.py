"""Steps that say which item they belong to: incompressible bytes that start with the item's
number, so a test can tell from any sample which item it got and that its bytes are whole."""
import numpy as np


def numbered_step(i: int, nbytes: int) -> np.ndarray:
    """Item i's one step of `nbytes` bytes."""
    step = np.random.default_rng(i).integers(0, 256, nbytes, dtype=np.uint8)
    step[:8] = np.frombuffer(np.int64(i).tobytes(), np.uint8)
    return step


def check_numbered_step(data, nbytes: int) -> int:
    """The item number of a sampled step, after checking every byte of it."""
    data = np.asarray(data)
    i = int(data[:8].view(np.int64)[0])
    np.testing.assert_array_equal(data, numbered_step(i, nbytes))
    return i
