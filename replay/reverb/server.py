"""Reverb's `server` module (`replay.reverb`): `Table` and `Server` over the service's own.

`Table` is `replay.table.Table` with Reverb's extras (`info` with the signature as given,
`replace`); `Server` is `replay.server.Server` taking Reverb's arguments, listening on loopback
unless told otherwise, and handing out `replay.reverb.Client`s.
"""
from __future__ import annotations

import dataclasses

from typing import Any, Optional, Sequence

from replay import errors
from replay import server as native_server
from replay import table as native_table
from replay.rate_limiters import RateLimiter, rate_limiter_from_config
from replay.reverb import reverb_types
from replay.selectors import selector_from_options

_UNSET = object()


class TableExtensionBase:
    """Reverb's extension base class; the service's extensions are `replay.extensions.TableExtension`."""


class Table(native_table.Table):
    """A replay table with Reverb's constructor and accessors.

    Raises (constructor): InvalidArgumentError (a ValueError), as `replay.Table`.
    """

    def __init__(self, name: str, sampler, remover, max_size: int, rate_limiter: RateLimiter,
                 max_times_sampled: int = 0, extensions: Sequence = (), signature: Any = None):
        super().__init__(name, sampler, remover, max_size, rate_limiter,
                         max_times_sampled=max_times_sampled, extensions=extensions, signature=signature)
        self._given_signature = signature

    @property
    def info(self) -> reverb_types.TableInfo:
        """Reverb's `TableInfo` of this table now (the signature as it was given)."""
        return dataclasses.replace(super().info, signature=self._given_signature)

    def replace(self, name: Optional[str] = None, sampler=None, remover=None, max_size: Optional[int] = None,
                rate_limiter: Optional[RateLimiter] = None, max_times_sampled: Optional[int] = None,
                signature: Any = _UNSET, extensions: Optional[Sequence] = None) -> "Table":
        """A new, empty table with this one's configuration except the arguments given.

        Raises:
          InvalidArgumentError: as the constructor.
        """
        config = self.config()
        return Table(
            name=self.name if name is None else name,
            sampler=sampler if sampler is not None else selector_from_options(config["sampler"]),
            remover=remover if remover is not None else selector_from_options(config["remover"]),
            max_size=self.max_size if max_size is None else max_size,
            rate_limiter=(rate_limiter if rate_limiter is not None
                          else rate_limiter_from_config(config["rate_limiter"])),
            max_times_sampled=self.max_times_sampled if max_times_sampled is None else max_times_sampled,
            extensions=() if extensions is None else extensions,
            signature=self._given_signature if signature is _UNSET else signature)


class Server(native_server.Server):
    """A replay server (Reverb's `Server(tables, port, checkpointer)`).

    Listens on 127.0.0.1 by default (Reverb listens on every interface); pass `host="0.0.0.0"`
    to serve other machines. The keyword arguments of `replay.Server` (token, TLS, limits) are
    accepted too.

    Raises:
      InvalidArgumentError (a ValueError): no tables or duplicate table names;
      UnavailableError: the port cannot be bound.
    """

    def __init__(self, tables: Optional[Sequence[native_table.Table]] = None, port: Optional[int] = None,
                 checkpointer=None, *args, **kwargs):
        if not tables:
            raise errors.InvalidArgumentError("a server needs at least one table; pass tables=[Table(...)]")
        if checkpointer is not None and hasattr(checkpointer, "internal_checkpointer"):
            checkpointer = checkpointer.internal_checkpointer()
        super().__init__(list(tables), port, checkpointer, *args, **kwargs)

    def __repr__(self) -> str:
        return f"Server(port={self.port})"

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the server stops (or `timeout` seconds pass)."""
        return super().wait(timeout)
