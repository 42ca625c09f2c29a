"""What a gRPC call needs when the interpreter finalizes it at exit.

Part of the client (replay/client.py). At interpreter exit gRPC's threads are stopped, some of
them holding a call's lock; a call object freed then (its owner, a stream left open in a
reference cycle or a global, finalized by the last collection) runs gRPC's own finalizer, which
takes that lock and waits forever, so the process never exits. `keep_forever` keeps such a call
from being freed: the process is ending, and its memory goes with it; `keep_if_finalizing` is
the check the client's streams make before they cancel or let go of a call.
"""
from __future__ import annotations

import ctypes
import sys

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


def keep_forever(obj: object) -> None:
    """Adds a reference to `obj` that nothing releases: it is never freed (and its finalizer
    never runs). Only for objects of a process that is ending."""
    _incref(obj)


def keep_if_finalizing(call: object, _is_finalizing=sys.is_finalizing,
                       _keep_forever=keep_forever) -> bool:
    """Whether the interpreter is finalizing; if it is, `call` (unless None) is kept forever
    instead of cancelled or freed, which would wait for gRPC's stopped threads. Its callers
    look this function up ahead of time (module globals may be gone at exit), and it takes what
    it needs as defaults bound at import."""
    if not _is_finalizing():
        return False
    if call is not None:
        _keep_forever(call)
    return True
