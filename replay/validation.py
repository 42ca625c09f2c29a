"""Checks of values received from the network, before anything is built from them.

The decoders (`replay.codec`, `replay.column_batch`) check a message's parallel fields with
`check_field_lengths` and every chunk with `validate_chunk`; the server, the client and the
writers check priorities and keys with `check_priority` and `check_key`. Each check raises a
named `replay.errors` exception (sent back as the matching gRPC status) and changes nothing.
"""
from __future__ import annotations

from typing import Sequence

from replay import errors
from replay.chunks import Chunk

_UINT64_MAX = 2**64 - 1


def check_field_lengths(what: str, expected: int, **fields: Sequence) -> None:
    """Raises InvalidArgumentError naming the first of `fields` (name -> values) that does not
    hold `expected` entries; `what` names the message in the error."""
    for name, values in fields.items():
        if len(values) != expected:
            raise errors.InvalidArgumentError(
                f"malformed {what}: field {name} has {len(values)} entries but {expected} are needed; "
                "the sender is broken or speaks another protocol version")


def validate_chunk(chunk: Chunk) -> None:
    """`Chunk.validate`: the server runs it on every chunk it receives, so that everything it
    stores can be sampled.

    Raises: as `Chunk.validate`.
    """
    chunk.validate()


def check_priority(key: int, priority: float) -> None:
    """Raises InvalidArgumentError unless `priority` is finite and >= 0."""
    if not (priority >= 0.0) or priority == float("inf"):
        raise errors.InvalidArgumentError(
            f"item {key}: priority must be a finite number >= 0, got {priority}")


def check_key(key: int) -> None:
    """Raises InvalidArgumentError unless `key` fits an unsigned 64-bit integer."""
    if not 0 <= key <= _UINT64_MAX:
        raise errors.InvalidArgumentError(f"item key {key} does not fit an unsigned 64-bit integer")
