"""A worker's experience source, chosen by its `input` setting (OfflineSettings): the envs
(`SamplerInput`), recorded files (`FileInput`), a replay table (replay_input.py), or a mix of
them (mixed_input.py).
"""
from __future__ import annotations

from typing import Callable, Optional

from tfrl import errors
from tfrl.offline.input_reader import InputReader, SamplerInput, file_input
from tfrl.offline.mixed_input import MixedInput
from tfrl.offline.replay_input import is_replay_source, replay_input


def make_input_reader(settings, sample_fn: Callable[[], object], worker_index: int = 0,
                      num_workers: int = 0, seed: Optional[int] = None) -> InputReader:
    """The reader `settings.input` (OfflineSettings) asks for; `sample_fn` samples the envs.

    Raises:
      NoInputFilesError: a file source that names no files.
      InvalidConfigError: mixing probabilities that are not positive or do not sum to 1.
      InvalidReplayInputError, ReplayInputUnreachableError: a replay table source that cannot
        be read (see replay_input.py).
    """
    spec = settings.input
    if spec == "sampler":
        return SamplerInput(sample_fn)
    if is_replay_source(spec):
        return replay_input(spec)
    if isinstance(spec, dict):
        if "replay" in spec and isinstance(spec["replay"], dict):
            raise errors.InvalidConfigError(
                f"input {spec!r}: a {{'replay': {{...}}}} source cannot be mixed; use its URL "
                "spelling as the key: {'sampler': 0.5, 'replay://HOST:PORT/TABLE': 0.5}")
        sources = {}
        for source in spec:
            if source == "sampler":
                sources[source] = SamplerInput(sample_fn)
            elif is_replay_source(source):
                sources[source] = replay_input(source)
            else:
                sources[source] = file_input(source, settings, worker_index, num_workers, seed)
        return MixedInput(sources, spec, seed=None if seed is None else seed + worker_index)
    return file_input(spec, settings, worker_index, num_workers, seed)
