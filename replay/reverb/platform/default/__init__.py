"""Reverb's default platform modules (`replay.reverb`)."""
