"""Hand-written protobuf framing that keeps chunk bytes outside the protobuf messages.

Inserts and sample responses carry most of their bytes in `ChunkBatch.column_data`. Copying
those into a protobuf message and out again costs two copies of every payload, so writers send
`PackedInsertRequest`s and the server sends `PackedSampleResponse`s: the message, then the
column bytes appended as one more occurrence of its `chunks` field (protobuf parsers merge
repeated occurrences, so any parser reads the plain message). `parse_sample_response` reads
such bytes back with the column data as views into the received buffer, and
`parse_insert_request` with each large column copied once out of it. The gRPC serializers
of `Client` and `Server` are the functions here; the messages are built by `replay.codec`.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from replay.proto import replay_pb2

class PackedInsertRequest:
    """An `InsertRequest` to send whose chunk bytes stay outside the protobuf message.

    `serialize_insert_request` writes `request` and then the bytes of `column_data` as a second
    occurrence of the `chunks` field holding only `column_data` entries. Protobuf parsers merge
    repeated occurrences of a message field (repeated fields are concatenated), so the receiver
    reads exactly the message it would get with the bytes inside `request.chunks.column_data`;
    the sender saves two copies of every payload (into the message and out of it again).
    """

    __slots__ = ("request", "column_data")

    def __init__(self, request: replay_pb2.InsertRequest, column_data: List[bytes]):
        self.request = request
        self.column_data = column_data


class PackedSampleResponse:
    """A `SampleResponse` whose chunk bytes travel outside the protobuf object, both ways.

    The server sends it with `serialize_sample_response` (the layout of `PackedInsertRequest`:
    the message, then one trailing `chunks` occurrence holding only `column_data`), so any
    protobuf parser still reads the plain message. Clients read it with
    `parse_sample_response`, which leaves `column_data` as views into the received bytes: large
    payloads are then copied once, straight into the learner's arrays, instead of into the
    parsed message and out of it again. `response.chunks.column_data` is always empty here.

    A response whose columns came through the reader's shared-memory ring (`replay.shared_ring`)
    has them as views into the ring in `column_data` (a columnar response's too, in place of
    `response.columns.data`), and `release`: call it once nothing reads those views any more,
    after copying what is needed out of them (the server then writes over them). Otherwise
    `release` is None.
    """

    __slots__ = ("response", "column_data", "release")

    def __init__(self, response: replay_pb2.SampleResponse, column_data: Sequence, release=None):
        self.response = response
        self.column_data = column_data
        self.release = release


# Protobuf keys (field number << 3 | wire type 2, length-delimited) of InsertRequest.chunks (1),
# SampleResponse.chunks (6) and ChunkBatch.column_data (12).
_KEY_INSERT_REQUEST_CHUNKS = bytes([(1 << 3) | 2])
_KEY_SAMPLE_RESPONSE_CHUNKS = bytes([(6 << 3) | 2])
_KEY_CHUNK_BATCH_COLUMN_DATA = bytes([(12 << 3) | 2])


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _ColumnPrefixes(dict):
    """The bytes before a `column_data` entry (its field key and length varint), by length."""

    def __missing__(self, length: int) -> bytes:
        prefix = _KEY_CHUNK_BATCH_COLUMN_DATA + _varint(length)
        if len(self) < 4096:  # writers send a few sizes over and over; a bound keeps it small
            self[length] = prefix
        return prefix


_COLUMN_PREFIXES = _ColumnPrefixes()


def _serialize_with_trailing_columns(head: bytes, chunks_key: bytes, column_data: Sequence) -> bytes:
    """`head` followed by `column_data` as one more occurrence of the `chunks` field; every
    payload is copied once, by the final join."""
    if not column_data:
        return head
    # A message carries up to thousands of entries: the per-entry work stays in C (map,
    # slice assignment, join) but for the first occurrence of a length.
    prefixes = list(map(_COLUMN_PREFIXES.__getitem__, map(len, column_data)))
    inner_size = sum(map(len, prefixes)) + sum(map(len, column_data))
    parts = [head, chunks_key, _varint(inner_size)] + [b""] * (2 * len(column_data))
    parts[3::2] = prefixes
    parts[4::2] = column_data
    return b"".join(parts)


def serialize_insert_request(packed: PackedInsertRequest) -> bytes:
    """The wire bytes of a `PackedInsertRequest` (gRPC request serializer of InsertStream)."""
    return _serialize_with_trailing_columns(
        packed.request.SerializeToString(), _KEY_INSERT_REQUEST_CHUNKS, packed.column_data)


def serialize_sample_response(packed: PackedSampleResponse) -> bytes:
    """The wire bytes of a `PackedSampleResponse` (gRPC response serializer of SampleStream)."""
    return _serialize_with_trailing_columns(
        packed.response.SerializeToString(), _KEY_SAMPLE_RESPONSE_CHUNKS, packed.column_data)


def _read_varint(view: memoryview, position: int, end: int) -> Tuple[int, int]:
    """(value, next position) of the varint at `position`; (-1, end) when it runs past `end`."""
    value = shift = 0
    while position < end:
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    return -1, end


def _trailer_bounds(view: memoryview, chunks_key: int) -> Optional[Tuple[int, int]]:
    """(field start, body start) of the message's last field when it is a `chunks`
    occurrence (the layout `serialize_sample_response` writes), else None."""
    end = len(view)
    position = 0
    trailer = None
    while position < end:
        field_start = position
        key, position = _read_varint(view, position, end)
        wire_type = key & 7
        body_start = position
        if wire_type == 2:
            length, position = _read_varint(view, position, end)
            if length < 0 or position + length > end:
                return None
            body_start = position
            position += length
        elif wire_type == 0:
            _, position = _read_varint(view, position, end)
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            return None
        trailer = (field_start, body_start) if key == chunks_key else None
    return trailer if position == end else None


def _column_views(view: memoryview, position: int) -> Optional[List[memoryview]]:
    """Views of the `column_data` entries from `position` to the end, or None when something
    else is there too."""
    end = len(view)
    column_key = _KEY_CHUNK_BATCH_COLUMN_DATA[0]
    columns = []
    while position < end:
        if view[position] != column_key:
            return None
        length, position = _read_varint(view, position + 1, end)
        if length < 0 or position + length > end:
            return None
        columns.append(view[position:position + length])
        position += length
    return columns


# Below this mean column size, parsing the whole message in C beats walking its columns in Python.
_MIN_VIEWED_COLUMN_BYTES = 2048


def _parse_with_trailing_columns(data: bytes, message_type, chunks_key: bytes):
    """(message, column data) of bytes a `_serialize_with_trailing_columns` layout may hold: the
    columns as views into `data` when they are large enough for that to pay, else the message
    parsed whole and its columns taken out of it (the message's `column_data` is then empty).

    Raises:
      google.protobuf.message.DecodeError: the bytes are not a `message_type`.
    """
    view = memoryview(data)
    trailer = _trailer_bounds(view, chunks_key[0])
    if trailer is not None:
        message = message_type.FromString(view[:trailer[0]])
        num_columns = len(message.chunks.flags)
        if (not message.chunks.column_data and num_columns
                and len(view) - trailer[1] >= num_columns * _MIN_VIEWED_COLUMN_BYTES):
            columns = _column_views(view, trailer[1])
            if columns is not None:
                return message, columns
    message = message_type.FromString(data)
    column_data = list(message.chunks.column_data)
    message.chunks.ClearField("column_data")
    return message, column_data


def parse_insert_request(data: bytes) -> PackedInsertRequest:
    """Reads InsertStream request bytes (the server's request deserializer of InsertStream).

    Bytes in the layout `serialize_insert_request` writes have their large columns copied once,
    each into a bytes object of its own (so a stored chunk keeps only its own bytes alive),
    instead of into the parsed message and out of it again; small columns and any other valid
    encoding are parsed whole. `request.chunks.column_data` is always empty in the result.

    Raises:
      google.protobuf.message.DecodeError: the bytes are not an InsertRequest.
    """
    request, columns = _parse_with_trailing_columns(data, replay_pb2.InsertRequest, _KEY_INSERT_REQUEST_CHUNKS)
    return PackedInsertRequest(request, [column if type(column) is bytes else bytes(column) for column in columns])


def parse_sample_response(data: bytes) -> PackedSampleResponse:
    """Reads SampleStream response bytes (the gRPC response deserializer of SampleStream).

    Bytes in the layout `serialize_sample_response` writes keep their column data as views into
    `data` when the columns are large enough for that to pay; small columns and any other valid
    encoding are parsed whole (column data is then copied out of the message).

    Raises:
      google.protobuf.message.DecodeError: the bytes are not a SampleResponse.
    """
    response, columns = _parse_with_trailing_columns(data, replay_pb2.SampleResponse, _KEY_SAMPLE_RESPONSE_CHUNKS)
    return PackedSampleResponse(response, columns)
