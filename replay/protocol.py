"""What a replay client and server agree on besides replay.proto's messages.

The protocol version both ends send (and check) in the call metadata, the metadata keys, the
gRPC service name, and the canonical JSON of the message fields that carry configuration
(`TableInfo.config_json`, checkpoint manifests), table signatures included. The messages
themselves are built by `replay.codec` and `replay.column_batch` and framed by `replay.framing`.
"""
from __future__ import annotations

import json
from typing import Optional

import numpy as np
import tree

from replay import errors, specs

PROTOCOL_VERSION = 1
"""Bumped whenever the meaning of a message changes; client and server must agree."""

SERVICE_NAME = "replay.ReplayService"
"""The gRPC service of replay.proto."""

PROTOCOL_METADATA_KEY = "replay-protocol"
TOKEN_METADATA_KEY = "replay-token"
DESCRIBE_TABLES_METADATA_KEY = "replay-describe-tables"
"""Call metadata of an InsertStream whose writer wants the tables' descriptions
(InsertResponse.tables) as the stream's first response."""
ERROR_CLASS_METADATA_KEY = "replay-error-class"
"""Trailing metadata of a failed call: the class name of the `replay.errors` error it raised."""


def signature_to_json(signature) -> Optional[object]:
    """A JSON-able nest of TensorSpec dicts (None stays None)."""
    if signature is None:
        return None
    return tree.map_structure(lambda s: s.to_dict(), specs.as_signature(signature))


def signature_from_json(value) -> Optional[object]:
    """Inverse of `signature_to_json`: dicts with exactly shape/dtype/name become TensorSpecs."""
    if value is None:
        return None

    def build(node):
        if isinstance(node, dict) and set(node) <= {"shape", "dtype", "name"} and "dtype" in node \
                and "shape" in node:
            return specs.TensorSpec.from_dict(node)
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [build(v) for v in node]
        raise errors.InvalidArgumentError(f"cannot read a signature leaf from {node!r}")

    return build(value)


def json_dumps(value) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype):
        return value.str
    if isinstance(value, specs.TensorSpec):
        return value.to_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {value!r}")
