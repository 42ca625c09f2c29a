"""Classic `ray.rllib.optimizers`: the policy optimizers (distributed execution strategies).

Names whose tfrl module is not part of this installation raise ImportError naming what is
missing."""
import importlib

_EXPORTS = {
    "PolicyOptimizer": ("tfrl.optimizers.policy_optimizer", "PolicyOptimizer"),
    "AsyncGradientsOptimizer": ("tfrl.optimizers.async_gradients_optimizer",
                                "AsyncGradientsOptimizer"),
    "SyncSamplesOptimizer": ("tfrl.optimizers.sync_samples_optimizer", "SyncSamplesOptimizer"),
    "SyncReplayOptimizer": ("tfrl.optimizers.sync_replay_optimizer", "SyncReplayOptimizer"),
    "LocalMultiGPUOptimizer": ("tfrl.optimizers.multi_device_optimizer",
                               "LocalMultiDeviceOptimizer"),
    "LocalMultiDeviceOptimizer": ("tfrl.optimizers.multi_device_optimizer",
                                  "LocalMultiDeviceOptimizer"),
    "AsyncSamplesOptimizer": ("tfrl.optimizers.async_samples_optimizer", "AsyncSamplesOptimizer"),
    "AsyncReplayOptimizer": ("tfrl.optimizers.async_replay_optimizer", "AsyncReplayOptimizer"),
}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _EXPORTS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ImportError(f"{__name__}.{name} needs {module_name}, which this tfrl version does "
                          "not have", name=module_name) from None
    value = getattr(module, attribute)
    globals()[name] = value
    return value


__all__ = list(_EXPORTS)
