"""InputReader: where a rollout worker's sample batches come from (the `input` config key).

A `RolloutWorker` samples from one InputReader (the RLlib paper's offline evaluator): its
`next()` returns the next batch. `SamplerInput` is the worker's own envs (`input: sampler`, the
default); `FileInput` reads recorded files (`input: DIR | glob | [files]`): TFRecord files
(tfrecord_reader.py) and RLlib-classic JSON lines (json_reader.py, files ending in `.json`),
cycling through them forever, each pass in a new random order, with an optional shuffle buffer
of batches; `ReplayInput` (replay_input.py) samples a replay server's table
(`input: "replay://HOST:PORT/TABLE"` or `{"replay": {"address": ..., "table": ...}}`);
`MixedInput` (mixed_input.py) mixes sources with given probabilities (`{"sampler": 0.5, DIR:
0.5}`, a `replay://` URL being a source too). `make_input_reader` (sources.py) builds the one the settings
ask for.

`last_was_recorded` tells the worker whether the batch just returned came from files, so it
postprocesses (`postprocess_inputs`) and evaluates off-policy (`input_evaluation`) only those.
"""
from __future__ import annotations

import glob
import logging
import os
import random
from typing import Callable, Iterator, List, Optional, Sequence, Union

from tfrl import errors

logger = logging.getLogger(__name__)

INPUT_EXTENSIONS = (".tfrecord", ".json")


class InputReader:
    """The interface a RolloutWorker samples from."""

    last_was_recorded = False

    def next(self):
        """The next SampleBatch (or MultiAgentBatch)."""
        raise NotImplementedError


class SamplerInput(InputReader):
    """Batches from the worker's env runner (`input: sampler`)."""

    def __init__(self, sample_fn: Callable[[], object]):
        self.sample_fn = sample_fn

    def next(self):
        self.last_was_recorded = False
        return self.sample_fn()


def resolve_input_files(spec: Union[str, Sequence[str]]) -> List[str]:
    """The files an `input` value names: a directory (its .tfrecord and .json files), a glob,
    a file, or a list of any of these; sorted, without duplicates.

    Raises:
      NoInputFilesError: no file matches; the message says what was looked for.
    """
    specs = [spec] if isinstance(spec, str) else list(spec)
    files: List[str] = []
    for entry in specs:
        if not isinstance(entry, str):
            raise errors.NoInputFilesError(
                f"input entries must be paths or globs (strings), got {entry!r}")
        path = os.path.expanduser(entry)
        if os.path.isdir(path):
            matches = [os.path.join(path, name) for name in sorted(os.listdir(path))
                       if name.endswith(INPUT_EXTENSIONS)]
        elif glob.has_magic(path):
            matches = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        else:
            matches = [path] if os.path.isfile(path) else []
        files.extend(m for m in matches if m not in files)
    if not files:
        raise errors.NoInputFilesError(
            f"input {spec!r} names no experience files (a directory is searched for "
            f"{' and '.join(INPUT_EXTENSIONS)} files); record some with `output: DIR` or "
            "point `input` at existing ones")
    return files


def read_file(path: str) -> Iterator:
    """The batches of one recorded file, by its format (`.json`: JSON lines, else TFRecord).

    Raises:
      CorruptRecordError, UnsupportedRecordError, OSError: see the two readers.
    """
    if path.endswith(".json"):
        from tfrl.offline.json_reader import read_json_file

        return read_json_file(path)
    from tfrl.offline.tfrecord_reader import read_tfrecord_file

    return read_tfrecord_file(path)


class FileInput(InputReader):
    """Batches read from recorded files, forever (see the module docstring).

    Args:
      files: the files (see `resolve_input_files`).
      skip_corrupt: log a damaged file and go on with the next one instead of raising.
      shuffle_buffer_size: hand batches out in random order from a buffer of this many.
      seed: seeds the file order and the shuffle buffer.
    """

    last_was_recorded = True

    def __init__(self, files: Sequence[str], skip_corrupt: bool = False,
                 shuffle_buffer_size: int = 0, seed: Optional[int] = None):
        self.files = list(files)
        self.skip_corrupt = skip_corrupt
        self.shuffle_buffer_size = shuffle_buffer_size
        self.rng = random.Random(seed)
        self.skipped: List[str] = []  # "path@offset" of every corrupt record skipped
        self._buffer: list = []
        self._batches = self._cycle()

    def _cycle(self) -> Iterator:
        while True:
            order = list(self.files)
            self.rng.shuffle(order)
            yielded = False
            for path in order:
                try:
                    for batch in read_file(path):
                        yielded = True
                        yield batch
                except errors.CorruptRecordError as exc:
                    if not self.skip_corrupt:
                        raise
                    self.skipped.append(f"{exc.path}@{exc.offset}")
                    logger.warning("skipping the rest of %s (input_skip_corrupt): %s",
                                   exc.path, exc)
            if not yielded:
                raise errors.NoInputFilesError(
                    f"the input files {self.files} hold no readable batch"
                    + (f" (skipped as corrupt: {self.skipped})" if self.skipped else ""))

    def next(self):
        """The next recorded batch.

        Raises:
          CorruptRecordError: a damaged file, unless skip_corrupt.
          UnsupportedRecordError: a classic RLlib batch packed with pickle.
          NoInputFilesError: a whole pass over the files gave no batch.
        """
        if self.shuffle_buffer_size <= 1:
            return next(self._batches)
        while len(self._buffer) < self.shuffle_buffer_size:
            self._buffer.append(next(self._batches))
        index = self.rng.randrange(len(self._buffer))
        self._buffer[index], self._buffer[-1] = self._buffer[-1], self._buffer[index]
        return self._buffer.pop()


def file_input(spec, settings, worker_index: int = 0, num_workers: int = 0,
               seed: Optional[int] = None) -> FileInput:
    """A FileInput over the files `spec` names; with several remote workers and at least as many
    files, worker i (1..N) reads every N-th file from the (i-1)-th, so workers read different
    data.

    Raises:
      NoInputFilesError: no file matches `spec`.
    """
    files = resolve_input_files(spec)
    if num_workers > 0 and worker_index > 0 and len(files) >= num_workers:
        files = files[worker_index - 1::num_workers]
    return FileInput(files, skip_corrupt=settings.input_skip_corrupt,
                     shuffle_buffer_size=settings.shuffle_buffer_size,
                     seed=None if seed is None else seed + worker_index)
