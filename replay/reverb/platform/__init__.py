"""Reverb's `platform` package (`replay.reverb`): checkpointer wrappers."""
