"""Deprecated alias of `tfrl.rollout` (the package was renamed; this alias goes in the next release).

`import tfrl.evaluation.rollout_worker` and `from tfrl.evaluation import RolloutWorker` keep working and
return the very same modules and classes as `tfrl.rollout`, with a DeprecationWarning.
"""
import importlib
import sys
import warnings

import tfrl.rollout as _rollout
from tfrl.rollout import *  # noqa: F401,F403
from tfrl.rollout import __all__  # noqa: F401

_SUBMODULES = ("action_adapter", "callbacks", "episode", "filters", "metrics", "multi_agent_sampler",
               "replay_output", "rollout_worker", "sampler", "worker_set")

warnings.warn("tfrl.evaluation was renamed to tfrl.rollout; import from tfrl.rollout instead",
              DeprecationWarning, stacklevel=2)

for _name in _SUBMODULES:
    _module = importlib.import_module(f"{_rollout.__name__}.{_name}")
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module
