"""A table's configuration as JSON-able data, and a table built from it.

Part of `replay.table.Table` (a mixin; `Table` is the only class built on it). `config()` is
what checkpoints, the ServerInfo message and `replace` read; `from_config` builds an empty table
from it or from a replay server's YAML table entry (`replay.config`); `replace` is Reverb's
`Table.replace`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

import tree

from replay import errors, specs
from replay.extensions import extension_from_config
from replay.rate_limiters import rate_limiter_from_config
from replay.selectors import selector_from_options

if TYPE_CHECKING:
    from replay.table import Table

_SPEC_KEYS = {"shape", "dtype", "name"}
_UNSET = object()


def _signature_to_config(signature):
    if signature is None:
        return None
    return tree.map_structure(lambda spec: spec.to_dict(), signature)


def _signature_from_config(config):
    """Inverse of `_signature_to_config`: a nest whose leaves are dicts with 'shape' and 'dtype'
    (and optionally 'name'); lists and tuples become lists, dicts stay dicts."""
    if config is None:
        return None
    if isinstance(config, dict):
        if "shape" in config and "dtype" in config and set(config) <= _SPEC_KEYS:
            return specs.TensorSpec.from_dict(config)
        return {k: _signature_from_config(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [_signature_from_config(v) for v in config]
    raise errors.InvalidArgumentError(
        f"signature: expected a nest of {{'shape': [...], 'dtype': ...}} specs, found {config!r}")


class TableConfig:
    """`config`, `from_config` and `replace` of a `replay.table.Table`."""

    def config(self) -> dict:
        """The table's full configuration as JSON-able data (no items, no counters)."""
        return {
            "name": self.name,
            "sampler": self._sampler.options(),
            "remover": self._remover.options(),
            "max_size": self.max_size,
            "max_times_sampled": self.max_times_sampled,
            "rate_limiter": self._rate_limiter.config(),
            "extensions": [extension.config() for extension in self._extensions],
            "signature": _signature_to_config(self.signature),
        }

    @classmethod
    def from_config(cls, config: dict) -> "Table":
        """Builds an empty table from `config()` output (also the replay server's YAML table entries).

        Required fields: name, sampler, remover, max_size, rate_limiter. Optional: max_times_sampled,
        extensions, signature.

        Raises:
          InvalidArgumentError: a missing, unknown or bad field; the message names it.
        """
        if not isinstance(config, dict):
            raise errors.InvalidArgumentError(f"a table config must be a dict, got {config!r}")
        known = {"name", "sampler", "remover", "max_size", "max_times_sampled", "rate_limiter", "extensions",
                 "signature"}
        label = f"table {config.get('name')!r}"
        unknown = set(config) - known
        if unknown:
            raise errors.InvalidArgumentError(
                f"{label}: unknown config field(s) {sorted(unknown)}; known: {sorted(known)}")
        for field in ("name", "sampler", "remover", "max_size", "rate_limiter"):
            if field not in config:
                raise errors.InvalidArgumentError(f"{label}: config field {field!r} is missing")

        def build(field, fn, value):
            try:
                return fn(value)
            except errors.InvalidArgumentError as e:
                raise errors.InvalidArgumentError(f"{label}: config field {field!r}: {e}") from e
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                raise errors.InvalidArgumentError(f"{label}: config field {field!r} is invalid ({value!r}): {e}") from e

        extensions_config = config.get("extensions") or []
        if not isinstance(extensions_config, (list, tuple)):
            raise errors.InvalidArgumentError(f"{label}: config field 'extensions' must be a list")
        return cls(
            name=config["name"],
            sampler=build("sampler", selector_from_options, config["sampler"]),
            remover=build("remover", selector_from_options, config["remover"]),
            max_size=config["max_size"],
            rate_limiter=build("rate_limiter", rate_limiter_from_config, config["rate_limiter"]),
            max_times_sampled=config.get("max_times_sampled", 0),
            extensions=[build("extensions", extension_from_config, e) for e in extensions_config],
            signature=build("signature", _signature_from_config, config.get("signature")),
        )

    def replace(self, name: Optional[str] = None, sampler=None, remover=None, max_size: Optional[int] = None,
                rate_limiter=None, max_times_sampled: Optional[int] = None, signature: Any = _UNSET,
                extensions: Optional[Sequence] = None) -> "Table":
        """A new, empty table with this one's configuration except the arguments given (Reverb's
        `Table.replace`; the selectors and the rate limiter are new objects built from this
        table's settings unless given, and extensions are not carried over unless given).

        Raises:
          InvalidArgumentError: as the constructor.
        """
        config = self.config()
        return type(self)(
            name=self.name if name is None else name,
            sampler=sampler if sampler is not None else selector_from_options(config["sampler"]),
            remover=remover if remover is not None else selector_from_options(config["remover"]),
            max_size=self.max_size if max_size is None else max_size,
            rate_limiter=(rate_limiter if rate_limiter is not None
                          else rate_limiter_from_config(config["rate_limiter"])),
            max_times_sampled=self.max_times_sampled if max_times_sampled is None else max_times_sampled,
            extensions=() if extensions is None else extensions,
            signature=self._given_signature if signature is _UNSET else signature)
