"""What a gRPC call needs when the interpreter finalizes it at exit.

Part of the client (replay/client.py). At interpreter exit gRPC's threads are stopped, some of
them holding a call's lock; a call object freed then (its owner, a stream left open in a
reference cycle or a global, finalized by the last collection) runs gRPC's own finalizer, which
takes that lock and waits forever, so the process never exits. `keep_forever` keeps such a call
from being freed: the process is ending, and its memory goes with it.
"""
from __future__ import annotations

import ctypes

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


def keep_forever(obj: object) -> None:
    """Adds a reference to `obj` that nothing releases: it is never freed (and its finalizer
    never runs). Only for objects of a process that is ending."""
    _incref(obj)
