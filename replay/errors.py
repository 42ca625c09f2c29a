"""Named errors of the replay service.

Every error a user can cause is one of these. Each carries the gRPC status code name it travels
as (`grpc_code`), so the server maps it to a status and the client maps the status back to the
same class: a caller catches the same exception in-process and over the network.
"""


class ReplayError(Exception):
    """Base class of every error raised by `replay`."""

    grpc_code = "UNKNOWN"


class InvalidArgumentError(ReplayError, ValueError):
    """An argument is malformed: bad priority, bad size, bad slice, bad rate-limiter settings."""

    grpc_code = "INVALID_ARGUMENT"


class SignatureMismatchError(InvalidArgumentError):
    """Data does not match a table's signature (structure, dtype or shape)."""


class ChunkDirError(InvalidArgumentError):
    """A disk-backed server's chunk directory is missing, not a directory, or not writable."""


class NotFoundError(ReplayError, LookupError):
    """An unknown table, item key or chunk key."""

    grpc_code = "NOT_FOUND"


class DeadlineExceededError(ReplayError, TimeoutError):
    """A rate limiter kept an insert or sample blocked past its timeout."""

    grpc_code = "DEADLINE_EXCEEDED"


class ResourceExhaustedError(ReplayError):
    """A message or a request is over a configured limit."""

    grpc_code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(ReplayError, RuntimeError):
    """The call cannot run in the current state (for example a protocol version mismatch, or a
    writer's history read before its first step; a RuntimeError, as Reverb raises there)."""

    grpc_code = "FAILED_PRECONDITION"


class DataLossError(ReplayError):
    """Chunk bytes are truncated or corrupt."""

    grpc_code = "DATA_LOSS"


class CorruptCheckpointError(DataLossError):
    """A checkpoint's file fails its checksum, or its manifest lacks or misstates a field; the
    message names the checkpoint, the file and the field."""


class UnavailableError(ReplayError, ConnectionError):
    """The server cannot be reached or went away."""

    grpc_code = "UNAVAILABLE"


class ServerUnreachableError(DeadlineExceededError, UnavailableError):
    """A call that waits for its server (`Client.server_info(timeout=...)`, as Reverb's) found
    none within its timeout: both a deadline passed (Reverb's error) and the server is
    unavailable (what callers that try another server catch)."""

    grpc_code = "UNAVAILABLE"


class UnauthenticatedError(ReplayError):
    """A wrong or missing access token."""

    grpc_code = "UNAUTHENTICATED"


class CancelledError(ReplayError, RuntimeError):
    """The table or server was closed while the call was waiting, or the writer was closed (a
    RuntimeError, as Reverb raises there)."""

    grpc_code = "CANCELLED"


ERRORS_BY_GRPC_CODE = {
    cls.grpc_code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        DeadlineExceededError,
        ResourceExhaustedError,
        FailedPreconditionError,
        DataLossError,
        UnavailableError,
        UnauthenticatedError,
        CancelledError,
    )
}
