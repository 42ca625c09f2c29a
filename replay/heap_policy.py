"""The heap policy of a replay process that streams large samples (a dataset's or a
server's).

A `ReplayDataset` receives its samples in responses of up to 16 MB, decodes them into blocks and
hands the blocks to tf.data, which frees them a moment later; gRPC, Python and TensorFlow
allocate and free buffers of that size all the time. With glibc's default settings a freed
block at the top of the heap above a few megabytes goes back to the kernel, and the next
allocation faults its pages in again, 4 kB at a time: measured with tools/compare_reverb.py's
40 kB dataset case, about ten page faults per item in the thread that receives the responses,
and the case ran at 18-20k items/s. Keeping freed memory in the process ran it at 24-28k.

`keep_freed_heap_memory()` sets three of glibc malloc's parameters:
- the mmap threshold to 32 MB, the largest glibc accepts: blocks below it come from the heap and
  are reused rather than mapped and unmapped each time;
- the trim threshold to 256 MB: freed memory at the top of the main heap is kept up to that much;
- the top pad to 64 MB, the size of a heap of the other threads' arenas: the threads that
  receive and decode samples allocate from those arenas, whose heaps glibc unmaps as soon as
  one is wholly free, and shrinks, whatever the trim threshold, unless the pad keeps them. With
  the first two alone the 40 kB dataset case still took about 200,000 page faults a second
  (nine per item) and ran at 21-23k items/s; with the pad too, a few hundred a second and
  28-29k items/s (2026-11-27, the same process and server). The pad only reserves address
  space: pages that are never touched take no memory.
The process then keeps up to 256 MB of freed memory in its main heap, and its threads' arenas
keep their heaps, instead of returning them.

The server's side is the same: it builds a response of megabytes for every batch it streams. In the
40 kB dataset case, applying the policy to the server's process too ran it at 25-30k items/s
against 23-27k with the client's alone.

The policy changes the allocator of the whole process, and a dataset or a server applies it by
default (`DEFAULT_KEEP_FREED_HEAP_MEMORY`), since that is how they stream fast: a
`ReplayDataset(...).batch(32)` of 40 kB items took 16.5 page faults and 70 us of CPU per item
without it, 0.5 and 38 us with it (2026-11-29, loaded 2-core machine).
`ReplayDataset(keep_freed_heap_memory=False)` and `Server(keep_freed_heap_memory=False)` leave
the process's allocator alone (`replay-server --no-keep-freed-heap-memory`). Setting
`GLIBC_TUNABLES=glibc.malloc.trim_threshold=...:glibc.malloc.mmap_threshold=...:glibc.malloc.top_pad=...`
in the environment before the process starts does the same from outside.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading

DEFAULT_KEEP_FREED_HEAP_MEMORY = True
"""Whether a `ReplayDataset` or a `Server` applies the policy unless told otherwise."""
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's upper limit on 64-bit systems
TOP_PAD_BYTES = 64 * 1024 * 1024  # glibc's HEAP_MAX_SIZE on 64-bit systems
_M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

_lock = threading.Lock()
_applied = False


def keep_freed_heap_memory() -> bool:
    """Applies the policy of the module docstring to this process (once; later calls do
    nothing). Returns whether it is in force: False where the C library is not glibc (no
    `mallopt`) or refused a setting.

    Raises nothing: a process that cannot take the policy keeps its allocator's defaults.
    """
    global _applied
    with _lock:
        if _applied:
            return True
        name = ctypes.util.find_library("c")
        try:
            mallopt = ctypes.CDLL(name).mallopt if name else None
        except (OSError, AttributeError):
            mallopt = None
        if mallopt is None:
            return False
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        # the mmap threshold first: setting either turns off glibc's own adjustment of both
        _applied = all(mallopt(parameter, value) for parameter, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
            (_M_TOP_PAD, TOP_PAD_BYTES)))
        return _applied
