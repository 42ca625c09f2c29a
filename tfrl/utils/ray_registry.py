"""Ray Tune's registry (classic RLlib's) as the way registrations reach the other processes of a
Ray session: a model, action distribution or env registered in a script is found by a Tune
trial's trainer and by remote rollout workers, as with classic RLlib. Used by the model catalog
(tfrl/models/catalog.py) and the env registry (tfrl/env/registry.py)."""
from __future__ import annotations

import logging
import pickle

logger = logging.getLogger(__name__)


def share_through_ray(category: str, name: str, value) -> None:
    """Also registers `value` in Ray Tune's registry (classic RLlib's), which reaches the other
    processes of the Ray session (a Tune trial's trainer, remote rollout workers): a script
    that registers a model and then calls `tune.run` works as with classic RLlib."""
    try:
        from ray.tune.registry import _global_registry
    except ImportError:  # Ray not installed: registration stays per process
        return
    try:
        _global_registry.register(category, name, value)
    except (TypeError, AttributeError, pickle.PicklingError) as exc:  # not picklable
        logger.warning("%s %r stays registered in this process only: %s", category, name, exc)


def shared_through_ray(category: str, name: str):
    """The value registered under `name` in Ray Tune's registry by another process of this
    Ray session, or None (no Ray session, or nothing registered)."""
    try:
        import ray
        from ray.tune.registry import _global_registry
    except ImportError:
        return None
    if not ray.is_initialized() or not _global_registry.contains(category, name):
        return None
    return _global_registry.get(category, name)
