"""Reverb's `checkpointers` (`replay.reverb`)."""
from replay.reverb.platform.default.checkpointers import *  # noqa: F401,F403
from replay.reverb.platform.default.checkpointers import __all__  # noqa: F401
