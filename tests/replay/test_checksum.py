"""The chunk checksum is the standard CRC-32 (checksums stored by earlier versions stay valid),
over every buffer a writer, the insert ring or a checkpoint hands it."""
import zlib

import numpy as np
import pytest

from replay import checksum


@pytest.mark.parametrize("size", [0, 1, 7, 100, 4096, 40_000, 409_600])
def test_crc32_is_zlibs_checksum_for_bytes_views_and_arrays(size):
    data = np.random.default_rng(size).integers(0, 256, size + 3, dtype=np.uint8)
    raw = data.tobytes()
    assert checksum.crc32(raw) == zlib.crc32(raw)
    view = memoryview(raw)[3:]
    assert checksum.crc32(view) == zlib.crc32(view)
    assert checksum.crc32(data[3:]) == zlib.crc32(data[3:].tobytes())
    assert checksum.crc32(raw, 12345) == zlib.crc32(raw, 12345)


def test_the_accelerated_crc32_is_the_one_installed():
    # zlib-ng is a dependency: a missing install would silently take the standard library's,
    # a third of the server's CPU per item at 40 kB
    from zlib_ng import zlib_ng
    assert checksum.crc32 is zlib_ng.crc32
