"""Classic RLlib's public module paths (Ray 0.8 to 1.x), over tfrl's own objects.

Code written for classic RLlib on TensorFlow runs here after one rewrite, `ray.rllib` ->
`tfrl.rllib`:

    from tfrl.rllib.agents.ppo import PPOTrainer            # was ray.rllib.agents.ppo
    from tfrl.rllib.policy.tf_policy_template import build_tf_policy

Every name under this package is the object the core `tfrl` package defines (re-exported under
the path classic code imports it from) or, where the classic call differs, a thin adapter over
it; nothing here is a second implementation. Submodules import their part of tfrl when they are
imported, so `import tfrl.rllib` is cheap. Importing this package registers tfrl's algorithm
names ("PPO", "DQN", ...) with Ray Tune, as importing classic RLlib did, so `tune.run("PPO")`
runs tfrl's trainer. Where tfrl deliberately differs from classic RLlib, the README section
"Coming from RLlib" says what and why.
"""
import importlib
from typing import Any

_SUBPACKAGES = ("agents", "env", "evaluation", "models", "offline", "optimizers", "policy",
                "utils")
# classic `ray.rllib` top-level names -> the tfrl.rllib module holding them
_EXPORTS = {
    "Policy": "tfrl.rllib.policy", "TFPolicy": "tfrl.rllib.policy",
    "RolloutWorker": "tfrl.rllib.evaluation", "SampleBatch": "tfrl.rllib.policy.sample_batch",
    "MultiAgentEnv": "tfrl.rllib.env",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _register_with_tune() -> None:
    from tfrl.tune import register_trainables

    register_trainables()


_register_with_tune()

__all__ = list(_SUBPACKAGES) + list(_EXPORTS)
