"""Reverb's error names over `replay.errors` (part of `replay.reverb`, the Reverb-compatible API).

`ReverbError` is `replay.errors.ReplayError`, so every error of the service is one; the other
classes are the service's own, which also subclass the Python built-ins Reverb users catch
(`ValueError` for invalid arguments, `TimeoutError` for deadlines).
"""
from replay.errors import *  # noqa: F401,F403 - the whole error family under Reverb's module name
from replay.errors import DeadlineExceededError, ReplayError

ReverbError = ReplayError

__all__ = ["DeadlineExceededError", "ReverbError"]
