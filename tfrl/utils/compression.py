"""lz4 packing of numpy arrays into self-describing bytes (no pickle).

SampleBatch.compress uses this for observation columns before batches cross process
boundaries (the RLlib paper's LZ4 observation compression). The header holds only the dtype
string and shape as JSON, so unpacking bytes received from elsewhere never runs code.
"""
from __future__ import annotations

import json
import struct

import lz4.frame
import numpy as np

from tfrl.errors import InvalidBatchError

_MAGIC = b"TFRLZ1"


def pack(array: np.ndarray) -> bytes:
    """Compress one numpy array (numeric or bool dtype) to bytes.

    Raises:
        InvalidBatchError: if the array holds Python objects, which cannot be packed safely.
    """
    array = np.ascontiguousarray(array)
    if array.dtype.hasobject:
        raise InvalidBatchError(
            "Only numeric/bool arrays can be lz4-compressed; this column has dtype object. "
            "Leave it out of the compressed columns.")
    header = json.dumps({"dtype": array.dtype.str, "shape": list(array.shape)}).encode()
    return _MAGIC + struct.pack("<I", len(header)) + header + lz4.frame.compress(array.tobytes())


def unpack(data: bytes) -> np.ndarray:
    """Inverse of `pack`.

    Raises:
        InvalidBatchError: if the bytes were not produced by `pack` or are corrupt.
    """
    try:
        if not data.startswith(_MAGIC):
            raise ValueError("bad magic")
        offset = len(_MAGIC)
        (header_len,) = struct.unpack_from("<I", data, offset)
        offset += 4
        header = json.loads(data[offset:offset + header_len])
        dtype = np.dtype(header["dtype"])
        if dtype.hasobject:
            raise ValueError("object dtype")
        raw = lz4.frame.decompress(data[offset + header_len:])
        return np.frombuffer(raw, dtype=dtype).reshape(header["shape"]).copy()
    except (ValueError, KeyError, TypeError, struct.error, RuntimeError) as exc:
        raise InvalidBatchError(
            f"Cannot decompress a column value ({exc}); it was not produced by "
            "tfrl.utils.compression.pack or is corrupt.") from exc


def is_packed(value) -> bool:
    """True if `value` looks like the output of `pack`."""
    return isinstance(value, (bytes, bytearray)) and bytes(value[:len(_MAGIC)]) == _MAGIC
