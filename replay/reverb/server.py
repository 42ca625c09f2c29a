"""Reverb's `server` module (`replay.reverb`): the service's `Table` and `Server` under Reverb's
path, which take Reverb's arguments themselves (`Table.replace`, `info` with the signature as
given, `Server(tables, port, checkpointer)` with Reverb's checkpointer classes), and Reverb's
extension base class.
"""
from replay.server import Server
from replay.table import Table


class TableExtensionBase:
    """Reverb's extension base class; the service's extensions are `replay.extensions.TableExtension`."""


__all__ = ["Server", "Table", "TableExtensionBase"]
