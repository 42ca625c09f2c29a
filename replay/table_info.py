"""`TableInfo`: a table's configuration and counters at one moment, in the shape of Reverb's.

One class for every reader: `Table.info` builds it on the server, `Client.server_info` rebuilds
it from the ServerInfo message, `replay.reverb.TableInfo` is this class. The selector options
read as Reverb's options messages (`info.sampler_options.fifo`,
`info.sampler_options.prioritized.priority_exponent`, `HasField('heap')`) and as the options
dict (`info.sampler_options["kind"]`, equal to that dict), the rate limiter's settings and
counters as attributes (`rate_limiter_info.sample_stats.completed`), the signature as
`replay.specs.TensorSpec`s (TensorFlow-free; each equals the `tf.TensorSpec` Reverb would give).
The service's own counters and its extensions' reports sit beside Reverb's fields. Imports
nothing of replay, so that the table and the client both can.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

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
        if isinstance(other, SelectorOptions):
            return other.options == self.options
        return isinstance(other, Mapping) and dict(other) == self.options

    __hash__ = None

    def __repr__(self) -> str:
        return f"SelectorOptions({self.options})"


@dataclasses.dataclass
class TableInfo:
    """A table's configuration and counters (Reverb's `TableInfo`, with the service's counters).

    Reverb's fields come first, in Reverb's order. Counters are cumulative since construction or
    the last `reset`: num_deletes counts removals at max_times_sampled and deletes through
    mutate_priorities; num_evictions counts removals by the remover when the table is over
    max_size. At any time num_inserts = current_size + num_deletes + num_evictions. Reverb's
    num_unique_samples counts items sampled for the first time (an item counts once, and stays
    counted when it is removed); num_episodes the episodes (chunk episode ids) that present items
    reference; num_deleted_episodes those whose last referencing item was removed.
    `sampler_options` and `remover_options` may be given as the selectors' options dicts.
    """

    name: str
    sampler_options: SelectorOptions
    remover_options: SelectorOptions
    max_size: int
    max_times_sampled: int
    rate_limiter_info: Any
    signature: Optional[Any]
    current_size: int
    num_episodes: int = 0
    num_deleted_episodes: int = 0
    num_unique_samples: int = 0
    table_worker_time: Any = None
    num_inserts: int = 0
    num_samples: int = 0
    num_deletes: int = 0
    num_evictions: int = 0
    num_updates: int = 0  # priority updates of present items (mutate_priorities, insert_or_assign)
    extensions: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.sampler_options, SelectorOptions):
            self.sampler_options = SelectorOptions(self.sampler_options)
        if not isinstance(self.remover_options, SelectorOptions):
            self.remover_options = SelectorOptions(self.remover_options)

    @property
    def size(self) -> int:
        """The service's name of `current_size`."""
        return self.current_size

    def __call__(self) -> "TableInfo":
        # `Table.info` was a method before it became a property (as Reverb's); `table.info()`
        # keeps working.
        return self
