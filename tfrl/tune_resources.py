"""TrialResources: the placement group request of a Tune trial running a tfrl trainer
(`tfrl.tune.trainer_resources` builds it), with classic RLlib's `to_json()`.

Classic scripts passed `Trainer.default_resource_request(config).to_json()` as Tune's
`resources_per_trial` (custom_train_fn.py). Classic's `Resources.to_json()` dict (`cpu`,
`extra_cpu`, ...) has no Ray 2.x counterpart: Ray 2.x reads a dict as one bundle, which the
function trainable itself holds, so rollout workers it starts find no resources. `to_json()`
here gives what Ray 2.x's `resources_per_trial` takes for that case: a plain
`PlacementGroupFactory` of the same bundles (the trainer's, then one per rollout and evaluation
worker).
"""
from __future__ import annotations

from ray.tune.execution.placement_groups import PlacementGroupFactory


class TrialResources(PlacementGroupFactory):
    """A PlacementGroupFactory with classic RLlib's `to_json()` (module docstring)."""

    def to_json(self) -> PlacementGroupFactory:
        """A plain PlacementGroupFactory of this request's bundles and strategy, which Ray
        2.x's `resources_per_trial` accepts where classic RLlib passed its resources dict."""
        return PlacementGroupFactory(self.bundles, strategy=self.strategy)


__all__ = ["TrialResources"]
