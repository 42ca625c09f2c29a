"""Lazy re-exports for package modules (PEP 562 `__getattr__`): a package names what it exports
and imports each on first use, so importing the package stays cheap (tfrl.rllib's classic paths;
tfrl.rollout and tfrl.agents.es, whose ES workers must not start TensorFlow)."""
import importlib
from typing import Any, Callable, Dict


def lazy_exports(module_name: str, exports: Dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `exports[name]` (a module path, or "module:attr"
    when the attribute is named differently there) on first use and caches it on the module."""
    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        target, _, attribute = exports[name].partition(":")
        value = getattr(importlib.import_module(target), attribute or name)
        setattr(importlib.import_module(module_name), name, value)
        return value
    return __getattr__


def lazy_package(module_name: str, names_by_module: Dict[str, tuple]):
    """(`__all__`, `__getattr__`) of a package exporting, for each of its submodules, the names
    `names_by_module[submodule]`, each imported on first use."""
    exports = {name: f"{module_name}.{module}" for module, names in names_by_module.items()
               for name in names}
    return list(exports), lazy_exports(module_name, exports)
