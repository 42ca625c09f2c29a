"""Reverb's `TableInfo`: what `Client.server_info` says of a table, with Reverb's field names.

Built from the server's `replay.table.TableInfo`: the selector options readable as Reverb's
options messages (`info.sampler_options.fifo`, `info.sampler_options.prioritized.priority_exponent`,
`HasField('heap')`) and as the options dict (`info.sampler_options["kind"]`), the rate limiter's
settings and counters as attributes (`rate_limiter_info.sample_stats.completed`), the signature as
`replay.specs.TensorSpec`s (TensorFlow-free; each equals the `tf.TensorSpec` Reverb would give),
and the service's own counters and extension reports beside Reverb's fields.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

_SELECTOR_FIELDS = {"Fifo": "fifo", "Lifo": "lifo", "Uniform": "uniform", "Prioritized": "prioritized",
                    "MinHeap": "heap", "MaxHeap": "heap"}


class _Options:
    """One selector's options as attributes (falsy when it is not the selector's kind)."""

    def __init__(self, present: bool, **fields):
        self._present = present
        self.__dict__.update(fields)

    def __bool__(self) -> bool:
        return self._present

    def __repr__(self) -> str:
        fields = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        return f"Options({fields})" if self._present else "Options(unset)"


class SelectorOptions:
    """A selector's description in the shape of Reverb's KeyDistributionOptions message."""

    def __init__(self, options: dict):
        self.options = dict(options)
        kind = self.options.get("kind", "")
        self.kind_field = _SELECTOR_FIELDS.get(kind, "")
        for field in set(_SELECTOR_FIELDS.values()):
            setattr(self, field, _Options(False))
        if self.kind_field == "prioritized":
            self.prioritized = _Options(True, priority_exponent=self.options.get("priority_exponent", 1.0))
        elif self.kind_field == "heap":
            self.heap = _Options(True, min_heap=kind == "MinHeap")
        elif self.kind_field:
            setattr(self, self.kind_field, _Options(True))
        self.is_deterministic = kind in ("Fifo", "Lifo", "MinHeap", "MaxHeap")

    def HasField(self, name: str) -> bool:  # noqa: N802 - the protobuf method's name
        return name == self.kind_field

    def __getitem__(self, key: str):
        return self.options[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The options dict's entry (`"kind"`, `"priority_exponent"`, ...)."""
        return self.options.get(key, default)

    def __eq__(self, other) -> bool:
        return isinstance(other, SelectorOptions) and other.options == self.options

    def __repr__(self) -> str:
        return f"SelectorOptions({self.options})"


@dataclasses.dataclass
class TableInfo:
    """A table's configuration and counters (Reverb's `TableInfo`).

    The service's own counters (num_inserts, num_samples, num_deletes, num_evictions,
    num_updates, see `replay.table.TableInfo`) and its extensions' reports are there too."""

    name: str
    sampler_options: SelectorOptions
    remover_options: SelectorOptions
    max_size: int
    max_times_sampled: int
    rate_limiter_info: Any
    signature: Optional[Any]
    current_size: int
    num_episodes: int
    num_deleted_episodes: int
    num_unique_samples: int
    table_worker_time: Any = None
    num_inserts: int = 0
    num_samples: int = 0
    num_deletes: int = 0
    num_evictions: int = 0
    num_updates: int = 0
    extensions: list = dataclasses.field(default_factory=list)
    native: Any = dataclasses.field(default=None, repr=False, compare=False)

    def __call__(self):
        # The service calls `table.info()` and reads its own TableInfo (see replay.table).
        return self.native

    @classmethod
    def from_native(cls, info, signature: Any = None) -> "TableInfo":
        """From a `replay.table.TableInfo`; `signature`, given, is used as is (the table's own)."""
        return cls(
            name=info.name, sampler_options=SelectorOptions(info.sampler_options),
            remover_options=SelectorOptions(info.remover_options), max_size=info.max_size,
            max_times_sampled=info.max_times_sampled, rate_limiter_info=info.rate_limiter_info,
            signature=signature if signature is not None else info.signature,
            current_size=info.size, num_episodes=info.num_episodes,
            num_deleted_episodes=info.num_deleted_episodes, num_unique_samples=info.num_unique_samples,
            num_inserts=info.num_inserts, num_samples=info.num_samples, num_deletes=info.num_deletes,
            num_evictions=info.num_evictions, num_updates=info.num_updates,
            extensions=list(info.extensions), native=info)
