"""MixedInput: an InputReader that draws each batch from one of several sources.

`input: {"sampler": 0.5, "/data/cartpole": 0.3, "/data/other/*.json": 0.2}` (RLlib's classic
spelling) makes every `next()` pick a source with the given probabilities: `sampler` is the
worker's envs, every other key a file source (see input_reader.py).
"""
from __future__ import annotations

import random
from typing import Dict, Mapping, Optional

from tfrl import errors
from tfrl.offline.input_reader import InputReader


class MixedInput(InputReader):
    """Batches from `sources` ({name: InputReader}) drawn with `probabilities` ({name: p}).

    Raises (constructor):
      InvalidConfigError: a probability that is not a positive number, or probabilities that
        do not sum to 1.
    """

    def __init__(self, sources: Dict[str, InputReader], probabilities: Mapping[str, float],
                 seed: Optional[int] = None):
        weights = []
        for name in sources:
            p = probabilities[name]
            if isinstance(p, bool) or not isinstance(p, (int, float)) or p <= 0:
                raise errors.InvalidConfigError(
                    f"input: the probability of {name!r} must be a positive number, got {p!r}")
            weights.append(float(p))
        if abs(sum(weights) - 1.0) > 1e-6:
            raise errors.InvalidConfigError(
                f"input: the mixing probabilities {dict(probabilities)} sum to {sum(weights)}, "
                "not 1")
        self.names = list(sources)
        self.sources = dict(sources)
        self.weights = weights
        self.rng = random.Random(seed)
        self.last_source: Optional[str] = None

    def next(self):
        name = self.rng.choices(self.names, weights=self.weights)[0]
        self.last_source = name
        source = self.sources[name]
        batch = source.next()
        self.last_was_recorded = source.last_was_recorded
        return batch
