"""TrialResources: the placement group request of a Tune trial running a tfrl trainer
(`tfrl.tune.trainer_resources` builds it), with classic RLlib's `to_json()`.

Classic scripts passed `Trainer.default_resource_request(config).to_json()` as Tune's
`resources_per_trial` (custom_train_fn.py); classic's `Resources.to_json()` has no Ray 2.x
counterpart, so `to_json()` here gives the dict form Ray 2.x's `resources_per_trial` accepts:
the request's whole CPUs, GPUs and custom resources as one bundle, which the trainer started
inside that trial (a function trainable) and its rollout workers share.
"""
from __future__ import annotations

from ray.tune.execution.placement_groups import PlacementGroupFactory


class TrialResources(PlacementGroupFactory):
    """A PlacementGroupFactory with classic RLlib's `to_json()` (module docstring)."""

    def to_json(self) -> dict:
        """`{"cpu": CPUs, "gpu": GPUs[, "custom_resources": {...}]}`, the sum of every bundle,
        as Ray 2.x's `resources_per_trial` dict."""
        total = dict(self.required_resources)
        out = {"cpu": float(total.pop("CPU", 0.0)), "gpu": float(total.pop("GPU", 0.0))}
        total.pop("memory", None)
        if total:
            out["custom_resources"] = total
        return out


__all__ = ["TrialResources"]
