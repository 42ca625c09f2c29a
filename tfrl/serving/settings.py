"""ServingSettings: the config keys both sides of the serving bridge act on.

The server reads them from the config of the worker it is bound to and sends the values it
resolved (`policy_info`), so a local-inference client acts as that worker does: with the same
exploration and the same clipping and rescaling of Box actions. A key the worker's config lacks
takes COMMON_CONFIG's value on both sides (tfrl/config/settings.py).
"""
from __future__ import annotations

import dataclasses
from typing import Literal, Optional

from tfrl.config.settings import Settings, setting


@dataclasses.dataclass(frozen=True)
class ServingSettings(Settings):
    """What a served policy's actions go through (module docstring)."""

    observation_filter: Optional[Literal["NoFilter", "MeanStdFilter"]] = setting(
        "observation filter of the worker's policy: local inference needs 'NoFilter'")
    explore: bool = setting("sample with the policy's exploration (False: act greedily)")
    clip_actions: bool = setting("clip Box actions to the space's bounds")
    normalize_actions: bool = setting("rescale Box actions from [-1, 1] to the space's bounds")

    def filtered(self) -> bool:
        """True when observations go through a filter whose statistics live in the trainer."""
        return str(self.observation_filter) != "NoFilter"
