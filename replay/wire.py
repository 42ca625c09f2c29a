"""The names `replay.wire` held before it was split by concern; kept so existing code imports on.

- `replay.protocol`: protocol version, service name, metadata keys, JSON of config fields.
- `replay.codec`: `ChunkBatch` / `ItemBatch` encoding and decoding.
- `replay.column_batch`: the columnar `ColumnBatch` of sample responses.
- `replay.framing`: packed insert requests and sample responses (chunk bytes outside messages).
- `replay.validation`: checks of received values.

New code imports from those modules.
"""
from replay.codec import (FLAG_COMPRESSED, FLAG_DELTA, ItemRow, decode_chunks, decode_items,
                          encode_chunks, encode_item_rows, encode_items, resolver)
from replay.column_batch import decode_columns, encode_columns
from replay.framing import (PackedInsertRequest, PackedSampleResponse, parse_sample_response,
                            serialize_insert_request, serialize_sample_response)
from replay.protocol import (PROTOCOL_METADATA_KEY, PROTOCOL_VERSION, SERVICE_NAME, TOKEN_METADATA_KEY,
                             json_dumps, signature_from_json, signature_to_json)
from replay.validation import check_key, check_priority, validate_chunk

__all__ = [
    "FLAG_COMPRESSED", "FLAG_DELTA", "ItemRow", "PROTOCOL_METADATA_KEY", "PROTOCOL_VERSION",
    "PackedInsertRequest", "PackedSampleResponse", "SERVICE_NAME", "TOKEN_METADATA_KEY", "check_key",
    "check_priority", "decode_chunks", "decode_columns", "decode_items", "encode_chunks",
    "encode_columns", "encode_item_rows", "encode_items", "json_dumps", "parse_sample_response",
    "resolver", "serialize_insert_request", "serialize_sample_response", "signature_from_json",
    "signature_to_json", "validate_chunk",
]
