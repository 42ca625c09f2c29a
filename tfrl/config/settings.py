"""Typed settings of tfrl's components, read once from a trainer's merged config.

A component (rollout worker, policy optimizer, learner) declares the config keys it reads as a
frozen dataclass deriving from `Settings`: one field per key, named like the key, with its type
and a one-line doc (`setting(doc, ...)`). `from_config(config)` reads every field from the
config at construction and checks its type and range, so a bad value fails there, with an
`InvalidConfigError` naming the key and what it must be, rather than deep inside a run.

The dataclasses hold no defaults: the one source of defaults is the config dicts
(`COMMON_CONFIG` in tfrl/config/defaults.py, each algorithm's `DEFAULT_CONFIG` in
tfrl/agents/<algo>/config.py). A component built without a trainer (a `RolloutWorker(...,
config={...})` in a script or a test) gets COMMON_CONFIG's value for every key its config lacks;
a key that only an algorithm's DEFAULT_CONFIG holds must be in the config. Unknown top-level keys
are refused earlier, when the trainer merges the user's config (tfrl/config/merge.py).
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal, Mapping, Optional, Sequence, TypeVar, Union

from tfrl import errors
from tfrl.config.defaults import COMMON_CONFIG

S = TypeVar("S", bound="Settings")

_MISSING = object()


def setting(doc: str, *, minimum: Optional[float] = None, above: Optional[float] = None,
            maximum: Optional[float] = None) -> Any:
    """A settings field: its one-line doc and, for numbers, its allowed range (`minimum` and
    `maximum` inclusive, `above` exclusive). The value always comes from the config."""
    return dataclasses.field(metadata={"doc": doc, "minimum": minimum, "above": above,
                                       "maximum": maximum})


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of the settings dataclasses; see the module docstring."""

    @classmethod
    def from_config(cls: type[S], config: Mapping[str, Any]) -> S:
        """The settings read from `config` (a trainer's merged config, or a partial config whose
        missing keys take COMMON_CONFIG's values).

        Raises:
          InvalidConfigError: a field's key is missing from the config and from COMMON_CONFIG,
            or its value has the wrong type or is out of range; the message names the key.
        """
        hints = typing.get_type_hints(cls)
        values = {}
        for field in dataclasses.fields(cls):
            key = field.name
            value = config.get(key, _MISSING) if isinstance(config, Mapping) else _MISSING
            if value is _MISSING:
                value = COMMON_CONFIG.get(key, _MISSING)
            if value is _MISSING:
                raise errors.InvalidConfigError(
                    f"{cls.__name__}: config key {key!r} is missing ({field.metadata['doc']}); "
                    "build the component from a trainer's merged config (COMMON_CONFIG + the "
                    "algorithm's DEFAULT_CONFIG + yours), or add the key")
            values[key] = _checked(cls.__name__, key, value, hints[key], field.metadata)
        return cls(**values)

    @classmethod
    def describe(cls) -> dict:
        """{key: one-line doc} of every field."""
        return {field.name: field.metadata["doc"] for field in dataclasses.fields(cls)}


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Union:
        return " or ".join(_type_name(arm) for arm in typing.get_args(tp))
    if origin is Literal:
        return " or ".join(repr(choice) for choice in typing.get_args(tp))
    if tp is type(None):
        return "None"
    if tp is float:
        return "a number"
    if tp is int:
        return "an int"
    if tp is bool:
        return "True or False"
    if tp is str:
        return "a string"
    if tp is dict or origin in (dict, Mapping):
        return "a dict"
    if tp is list or origin in (list, Sequence):
        return "a list"
    return getattr(tp, "__name__", str(tp))


def _converted(value: Any, tp: Any) -> Any:
    """`value` as type `tp`, or _MISSING when it is not one (no lossy conversions: a str is
    never a number, a bool never an int, a float only an int when it is whole)."""
    import numpy as np

    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Union:
        for arm in typing.get_args(tp):
            converted = _converted(value, arm)
            if converted is not _MISSING:
                return converted
        return _MISSING
    if origin is Literal:
        return value if any(value == choice and type(value) is type(choice)
                            for choice in typing.get_args(tp)) else _MISSING
    if tp is type(None):
        return value if value is None else _MISSING
    if tp is bool:
        return bool(value) if isinstance(value, (bool, np.bool_)) else _MISSING
    if tp is int:
        if isinstance(value, (bool, np.bool_)):
            return _MISSING
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
        return _MISSING
    if tp is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            return _MISSING
        return float(value)
    if tp is str:
        return value if isinstance(value, str) else _MISSING
    if tp is dict or origin in (dict, Mapping):
        return value if isinstance(value, Mapping) else _MISSING
    if tp is list or origin in (list, Sequence):
        return value if isinstance(value, (list, tuple)) else _MISSING
    raise TypeError(f"settings fields cannot have type {tp!r}")


def _checked(owner: str, key: str, value: Any, tp: Any, metadata: Mapping[str, Any]) -> Any:
    converted = _converted(value, tp)
    doc = metadata["doc"]
    if converted is _MISSING:
        raise errors.InvalidConfigError(
            f"config key {key!r} must be {_type_name(tp)} ({doc}), got {value!r} "
            f"({type(value).__name__}); read by {owner}")
    if isinstance(converted, (int, float)) and not isinstance(converted, bool):
        low, above, high = metadata["minimum"], metadata["above"], metadata["maximum"]
        if (low is not None and converted < low) or (above is not None and converted <= above) \
                or (high is not None and converted > high):
            bounds = " and ".join(part for part in (
                f">= {low}" if low is not None else "", f"> {above}" if above is not None else "",
                f"<= {high}" if high is not None else "") if part)
            raise errors.InvalidConfigError(
                f"config key {key!r} must be {bounds} ({doc}), got {value!r}; read by {owner}")
    return converted
