"""Failed gRPC calls as `replay.errors`: the client's side of the server's error statuses.

The server ends a failed call with the gRPC status of its error and the error's class name in
the trailing metadata (`replay.server_calls.end_failed_call`); `translate_rpc_error` raises that
exact class on the client, or the class of the status code for gRPC's own failures, so callers
catch the same exceptions as in-process.
"""
from __future__ import annotations

import grpc

from replay import errors, protocol


def server_error_class(error: grpc.RpcError):
    """The `replay.errors` class the server named for this failure, or None (gRPC's own errors)."""
    try:
        for key, value in error.trailing_metadata() or ():
            if key == protocol.ERROR_CLASS_METADATA_KEY:
                candidate = getattr(errors, value, None)
                if isinstance(candidate, type) and issubclass(candidate, errors.ReplayError):
                    return candidate
    except Exception:  # noqa: BLE001 - some failures (a dead connection) carry no metadata
        pass
    return None


def translate_rpc_error(error: grpc.RpcError, what: str = "") -> errors.ReplayError:
    """The `replay.errors` exception matching a failed gRPC call."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    cls = server_error_class(error)
    name = code.name if code is not None else "UNKNOWN"
    if cls is None:
        cls = errors.ERRORS_BY_GRPC_CODE.get(name, errors.ReplayError)
    message = details or name
    if name == "UNAVAILABLE":
        message = f"the replay server is unavailable ({details}); check that it runs and the address"
    elif name == "RESOURCE_EXHAUSTED" and "larger than max" in (details or ""):
        message = (f"{details}: the message is over the max_message_bytes limit; send smaller messages "
                   "(smaller chunks or batches) or raise max_message_bytes on both the server "
                   "(Server(max_message_bytes=...), replay-server --max-message-bytes) and the Client")
    if what:
        message = f"{what}: {message}"
    return cls(message)
