"""How the replay server's calls fail: a request that is not a replay.proto message, and an
exception raised while serving a call, become the call's gRPC status.

Part of the replay server (replay/server.py): its handlers (the unary calls there, InsertStream
in replay/insert_service.py, SampleStream in replay/sample_service.py) end a failed call with
`end_failed_call`. A `ReplayError` travels as its status code with its class name in the trailing metadata (the
client raises the same class); anything else is a bug, logged with its traceback and sent as
INTERNAL, rather than a call left hanging.
"""
from __future__ import annotations

import logging

import grpc

from replay import errors, protocol

log = logging.getLogger("replay.server")


class MalformedRequest:
    """What a request deserializer returns for bytes that are not the method's message (grpc
    would answer INTERNAL for a deserializer that raises, and leave a stream's handler waiting)."""

    def __init__(self, method: str, error: Exception):
        self.method, self.error = method, error


def tolerant_deserializer(method: str, deserializer):
    """`deserializer` for `method` that returns a `MalformedRequest` instead of raising."""

    def deserialize(data: bytes):
        try:
            return deserializer(data)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, or anything a parser raises
            return MalformedRequest(method, e)

    return deserialize


def check_request(request) -> None:
    """Raises InvalidArgumentError for a request that could not be parsed."""
    if isinstance(request, MalformedRequest):
        raise errors.InvalidArgumentError(
            f"malformed {request.method} request: the bytes are not a replay.proto message "
            f"({request.error}); the sender is broken or speaks another protocol")


async def abort(context, error: errors.ReplayError):
    """Ends the call with `error`'s status code and message, its class in the trailing metadata."""
    code = getattr(grpc.StatusCode, error.grpc_code, grpc.StatusCode.UNKNOWN)
    context.set_trailing_metadata(((protocol.ERROR_CLASS_METADATA_KEY, type(error).__name__),))
    await context.abort(code, str(error))


async def end_failed_call(context, error: Exception, method: str):
    """Ends a call that raised: a `ReplayError` as its status code, anything else (a bug) as
    INTERNAL, logged with its traceback, rather than leaving the client hanging."""
    if isinstance(error, errors.ReplayError):
        await abort(context, error)
    log.error("replay server: unexpected error in %s", method, exc_info=error)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal server error: {error!r}")
