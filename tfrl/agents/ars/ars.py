"""ARS trainer: augmented random search (Mania et al., 2018) as a sibling of ES.

It reuses ES's workers, shared noise table, observation filter and aggregation tree
(tfrl/agents/es); only three parts differ: the shaping keeps the `rollouts_used` best directions
by max(r+, r-) and divides their r+ - r- by the standard deviation of their returns
(fitness.top_directions_weights), the update is divided by b, and the step is plain SGD.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from tfrl import errors
from tfrl.agents.ars.config import DEFAULT_CONFIG
from tfrl.agents.es.es import ESTrainer
from tfrl.agents.es.es import validate_config as validate_es_config
from tfrl.agents.es.optimizers import SGD


def validate_config(config: dict) -> None:
    """ES's checks plus rollouts_used.

    Raises:
      InvalidConfigError: as ES's validate_config, or rollouts_used neither None nor >= 1.
    """
    validate_es_config(config)
    used = config["rollouts_used"]
    if used is not None and (isinstance(used, bool) or not isinstance(used, int) or used < 1):
        raise errors.InvalidConfigError(f"rollouts_used must be None or an integer >= 1, got {used!r}")


class ARSTrainer(ESTrainer):
    """Augmented random search; see the module docstring."""

    trainer_name = "ARS"
    _default_config = DEFAULT_CONFIG

    def _init(self, config: dict) -> None:
        validate_config(config)
        super()._init(config)

    def shaping_settings(self) -> Dict[str, Any]:
        return {"shaping": "top_directions", "num_top": self.config["rollouts_used"]}

    def make_optimizer(self, dim: int):
        return SGD(dim, self.config["stepsize"])

    def ascent_direction(self, direction: np.ndarray, num_pairs: int) -> np.ndarray:
        used = self.config["rollouts_used"]
        return direction / min(used or num_pairs, num_pairs)
