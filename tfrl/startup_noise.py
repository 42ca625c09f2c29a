"""Quiet start-up for the `tfrl` command: TensorFlow's, absl's and Ray's start-up messages.

TensorFlow's native libraries log through absl before absl is initialised ("WARNING: All log
messages before absl::InitializeLog() is called are written to STDERR", oneDNN, CUDA stub and
CPU feature notices), which no environment variable turns off; they are written to file
descriptor 2 from C++, so `quiet_startup` puts a filter between that descriptor and the
terminal: it drops lines in absl's native log format and the few known start-up notices, and
passes everything else (tracebacks, warnings of our own, errors) through. It also lowers the
TensorFlow and absl Python loggers to errors. `tfrl ... --verbose` leaves all of it on.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import threading
from typing import Optional

# absl/glog native lines: "I0000 00:00:1795396740.684482   20281 port.cc:153] ...", plus the
# banner absl prints before them and the continuation line of TF's CPU feature notice; Ray's
# notice that a local cluster uses token authentication.
NOISE = re.compile(
    rb"^(?:[IWE]\d{4} \d\d:\d\d:[\d.]+\s+\d+ [\w./-]+:\d+\] "
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|To enable the following instructions: .* rebuild TensorFlow"
    rb"|Token authentication is enabled for this Ray cluster)")


class StderrFilter:
    """Replaces file descriptor 2 by a pipe whose lines are forwarded to the original stderr,
    except those matching `NOISE`. `stop()` restores the descriptor."""

    def __init__(self):
        self._original: Optional[int] = None
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        sys.stderr.flush()
        self._original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(target=self._forward, args=(read_end, self._original),
                                        daemon=True, name="tfrl-stderr-filter")
        self._thread.start()

    @staticmethod
    def _forward(read_end: int, original: int) -> None:
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            for line in iter(pipe.readline, b""):
                if not NOISE.match(line):
                    os.write(original, line)

    def stop(self) -> None:
        """Puts the original stderr back; lines already in the pipe are still forwarded (child
        processes such as Ray's may keep writing into it until they exit)."""
        if self._original is None:
            return
        sys.stderr.flush()
        os.dup2(self._original, 2)  # the pipe's write end is now held only by child processes
        self._thread.join(timeout=1.0)
        self._original = None


def quiet_startup() -> StderrFilter:
    """Silences TensorFlow/absl/Ray start-up messages in this process (call it before anything
    imports TensorFlow) and returns the started `StderrFilter`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # inherited by Ray's worker processes
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    stderr_filter = StderrFilter()
    stderr_filter.start()
    return stderr_filter
