"""Reverb's `client` module (`replay.reverb`): `Client` (which is `replay.Client`) and the
legacy `Writer` its `writer` method returns (`replay.writer.Writer`)."""
from replay.client import Client
from replay.writer import Writer

__all__ = ["Client", "Writer"]
