"""StructuredWriter: items built from static patterns over the step stream (Reverb's).

A pattern is a nest of `PatternNode`s, each selecting cells of one column of the step stream
relative to the newest step (`ref_step['a'][-3:]`: the last three values of `a` with a time
dimension; `ref_step['a'][-1]`: the newest value, without one). A `StructuredWriterConfig` joins a
pattern with a table, a priority function and `Condition`s (step index, steps since the config
was last applied, a scalar of the step's data, end of episode). `StructuredWriter` evaluates the
configs after every completed step and inserts an item for each one that applies, through
`replay.TrajectoryWriter`, so the chunks and items on the wire are the service's own.
`replay.reverb.structured_writer` is this module under Reverb's path, with the TensorFlow
helper `infer_signature`.

The configs are plain Python objects here (Reverb uses protos from its C++ build); their fields
and helpers (`HasField`, `flat`, `conditions`, `table`, `priority`) have Reverb's names.
`PatternEngine` holds the evaluation rules and is shared with `replay.reverb.pattern_dataset`.
"""
from __future__ import annotations

import collections
import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, List, Optional, Sequence, Tuple

import numpy as np
import tree

from replay import errors, specs


# -- the config objects (Reverb's patterns protos) ----------------------------------------------

class PatternNode:
    """Cells of the column `flat_source_index`: a slice of the step history (`start` set: with
    a time dimension; an unset or 0 `stop` reaches the newest step) or the single cell at index
    `stop` (no time dimension). Indices count back from the newest step (-1). Unset fields read
    0, as in a proto; `HasField` says whether one is set. `validate_config` holds the rules."""

    __slots__ = ("flat_source_index", "_start", "_stop", "_step")

    def __init__(self, flat_source_index: int, start: Optional[int] = None, stop: Optional[int] = None,
                 step: Optional[int] = None):
        self.flat_source_index = int(flat_source_index)
        self._start, self._stop, self._step = start, stop, step

    start = property(lambda self: self._start or 0)
    stop = property(lambda self: self._stop or 0)
    step = property(lambda self: self._step or 0)

    def HasField(self, name: str) -> bool:  # noqa: N802 - Reverb's (proto) name
        return getattr(self, "_" + name) is not None

    @property
    def has_time_dimension(self) -> bool:
        return self._start is not None

    def history_length(self) -> int:
        """How many of the newest steps must be buffered for this node to be applied (Reverb's
        client: the larger distance back of start and stop)."""
        return max(1, abs(min(self.start, self.stop)))

    def select(self, buffer: Sequence[Any]):
        """The buffered entries this node picks (a list, or one entry without time dimension)."""
        if self._start is None:
            return buffer[self._stop]
        return list(buffer[self._start:self._stop or None:self._step])

    def num_cells(self) -> int:
        return max(0, math.ceil((self.stop - self.start) / (self._step or 1)))

    def _key(self):
        return (self.flat_source_index, self._start, self._stop, self._step)

    def __eq__(self, other) -> bool:
        return isinstance(other, PatternNode) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        parts = [f"flat_source_index={self.flat_source_index}"]
        parts += [f"{n}={getattr(self, '_' + n)}" for n in ("start", "stop", "step") if self.HasField(n)]
        return f"PatternNode({', '.join(parts)})"


_LEFT_KINDS = ("step_index", "steps_since_applied", "buffer_length", "is_end_episode", "flat_source_index")


@dataclass
class ConditionProto:
    """`left` (one of step_index, steps_since_applied, buffer_length, is_end_episode,
    flat_source_index) compared with `eq`, `ge` or `mod_eq` (`value % mod == eq`); `inverse`
    negates it. The keyword arguments follow Reverb's proto (`ConditionProto(step_index=True)`)."""

    left: str = "step_index"
    flat_source_index: int = 0
    cmp: str = "eq"
    value: int = 0
    mod: int = 0
    inverse: bool = False

    def __init__(self, *, step_index=False, steps_since_applied=False, buffer_length=False,
                 is_end_episode=False, flat_source_index=None, eq=None, ge=None, inverse=False):
        chosen = [name for name, on in (("step_index", step_index), ("steps_since_applied", steps_since_applied),
                                        ("buffer_length", buffer_length), ("is_end_episode", is_end_episode),
                                        ("flat_source_index", flat_source_index is not None)) if on]
        if len(chosen) > 1:
            raise errors.InvalidArgumentError(f"a condition has one left-hand side, got {chosen}")
        self.left = chosen[0] if chosen else "step_index"
        self.flat_source_index = int(flat_source_index or 0)
        self.cmp, self.value, self.mod = "eq", 0, 0
        if ge is not None:
            self.cmp, self.value = "ge", int(ge)
        elif eq is not None:
            self.value = int(eq)
        self.inverse = bool(inverse)

    def holds(self, lhs: int) -> bool:
        if self.cmp == "ge":
            result = lhs >= self.value
        elif self.cmp == "mod_eq":
            result = lhs % self.mod == self.value
        else:
            result = lhs == self.value
        return result != self.inverse


@dataclass
class Priority:
    """A constant priority (`constant_fn`) or a TD-error priority (`td_error`)."""

    constant: Optional[float] = None
    td_max_priority_weight: float = 0.0
    td_flat_source_index: Optional[int] = None

    def compute(self, pattern_flat: Sequence[PatternNode], flat_values: Sequence[np.ndarray]) -> float:
        if self.td_flat_source_index is None:
            return float(self.constant if self.constant is not None else 1.0)
        for node, value in zip(pattern_flat, flat_values):
            if node.flat_source_index == self.td_flat_source_index:
                errors_abs = np.abs(np.asarray(value, np.float64))
                weight = self.td_max_priority_weight
                return float(weight * errors_abs.max() + (1 - weight) * errors_abs.mean())
        raise errors.InvalidArgumentError(
            f"the td_error priority reads column {self.td_flat_source_index}, which the pattern does not use")


@dataclass
class StructuredWriterConfig:
    """One pattern, the table its items go to, their priority and the conditions to apply it."""

    flat: List[PatternNode]
    pattern_structure: Any
    table: str
    priority: Priority
    conditions: List[ConditionProto] = field(default_factory=list)

    def HasField(self, name: str) -> bool:  # noqa: N802 - Reverb's (proto) name
        return name == "pattern_structure" or getattr(self, name, None) is not None

    def history_length(self) -> int:
        need = max((node.history_length() for node in self.flat), default=1)
        for condition in self.conditions:
            if condition.left == "buffer_length" and condition.cmp == "ge" and not condition.inverse:
                need = max(need, condition.value)
        return need


Config = StructuredWriterConfig
Pattern = Any
ReferenceStep = Any


# -- building patterns, configs and conditions ---------------------------------------------------

class _RefNode:
    """A leaf of a reference step: indexing it builds a `PatternNode` of its column."""

    def __init__(self, idx: int):
        self._idx = idx

    def __getitem__(self, key) -> PatternNode:
        # As Reverb's: an int is the slice `[:key]`, whose node has no start (one cell); the
        # bounds are checked when the writer is made (`validate_config`).
        if isinstance(key, int):
            key = slice(key)
        elif not isinstance(key, slice):
            raise ValueError(f"Key must be int or slice by got {key} (type {type(key)}).")
        return PatternNode(self._idx, start=key.start, stop=key.stop, step=key.step)


def create_reference_step(step_structure: Any) -> ReferenceStep:
    """A nest like `step_structure` whose leaves build `PatternNode`s when indexed
    (`ref['a'][-2:]`, `ref['b'][-1]`)."""
    return tree.unflatten_as(step_structure, [_RefNode(i) for i in range(len(tree.flatten(step_structure)))])


def pattern_from_transform(step_structure: Any, transform: Callable[[ReferenceStep], Pattern]) -> Pattern:
    """The pattern `transform` builds from a reference step of `step_structure`."""
    return transform(create_reference_step(step_structure))


def constant_priority_fn(value: float) -> Priority:
    """A priority function that always gives `value`."""
    return Priority(constant=float(value))


def td_error(max_priority_weight: float, step_structure: Any,
             get_field_from_step_fn: Callable[[Any], Any]) -> Priority:
    """Priority `w * max(|td|) + (1 - w) * mean(|td|)` of the item's cells of the step field
    `get_field_from_step_fn` picks (which the pattern must use exactly once)."""
    flat_index = tree.unflatten_as(step_structure, list(range(len(tree.flatten(step_structure)))))
    return Priority(td_max_priority_weight=float(max_priority_weight),
                    td_flat_source_index=int(get_field_from_step_fn(flat_index)))


def create_config(pattern: Pattern, table: str, conditions: Sequence[ConditionProto] = (),
                  priority: Optional[Priority] = None) -> StructuredWriterConfig:
    """A config inserting `pattern` into `table` (priority 1.0 unless given) whenever all
    `conditions` hold.

    Raises:
      ValueError: a pattern leaf that is not a PatternNode.
    """
    flat = tree.flatten(pattern)
    for node in flat:
        if not isinstance(node, PatternNode):
            raise ValueError(f"pattern leaves must be PatternNodes (index a reference step), got {node!r}")
    return StructuredWriterConfig(flat=list(flat), pattern_structure=tree.map_structure(lambda _: None, pattern),
                                  table=table, priority=priority or constant_priority_fn(1.0),
                                  conditions=list(conditions))


def unpack_pattern(config: StructuredWriterConfig) -> Pattern:
    """The pattern nest of `config`."""
    return tree.unflatten_as(config.pattern_structure, config.flat)


class _ConditionBuilder:
    """Comparisons on a left-hand side build conditions (`Condition.step_index() % 3 == 0`)."""

    def __init__(self, incomplete: ConditionProto):
        self._incomplete = incomplete

    def __mod__(self, mod: int) -> "_ConditionBuilder":
        if mod <= 0:
            raise ValueError(f"the modulus of a condition must be positive, got {mod}")
        condition = copy.copy(self._incomplete)
        condition.cmp, condition.mod = "mod_eq", int(mod)
        return _ConditionBuilder(condition)

    def __eq__(self, value: int) -> ConditionProto:  # type: ignore[override]
        condition = copy.copy(self._incomplete)
        condition.value = int(value)
        return condition

    def __ne__(self, value: int) -> ConditionProto:  # type: ignore[override]
        condition = self == value
        condition.inverse = True
        return condition

    def __ge__(self, value: int) -> ConditionProto:
        if self._incomplete.cmp == "mod_eq":
            raise ValueError("a modulo condition can only be compared with == or !=")
        condition = copy.copy(self._incomplete)
        condition.cmp, condition.value = "ge", int(value)
        return condition

    def __gt__(self, value: int) -> ConditionProto:
        return self >= value + 1

    def __lt__(self, value: int) -> ConditionProto:
        condition = self >= value
        condition.inverse = True
        return condition

    def __le__(self, value: int) -> ConditionProto:
        condition = self >= value + 1
        condition.inverse = True
        return condition

    __hash__ = None


class Condition:
    """The left-hand sides conditions are built from."""

    @staticmethod
    def step_index() -> _ConditionBuilder:
        """Index (from 0) of the newest step within the episode."""
        return _ConditionBuilder(ConditionProto(step_index=True))

    @staticmethod
    def steps_since_applied() -> _ConditionBuilder:
        """Steps appended since the config last inserted an item (all steps, before the first)."""
        return _ConditionBuilder(ConditionProto(steps_since_applied=True))

    @staticmethod
    def is_end_episode() -> ConditionProto:
        """Holds only when `end_episode` is called; configs without it apply on `append`."""
        return ConditionProto(is_end_episode=True, eq=1)

    @staticmethod
    def data(step_structure: Any):
        """A nest like `step_structure` whose leaves compare the newest step's scalar (int or
        bool) value of that field."""
        flat = [_ConditionBuilder(ConditionProto(flat_source_index=i))
                for i in range(len(tree.flatten(step_structure)))]
        return tree.unflatten_as(step_structure, flat)


def validate_config(config: StructuredWriterConfig, position: int) -> None:
    """Reverb's checks of a config when its writer is made (structured_writer.cc,
    ValidateStructuredWriterConfig).

    Raises:
      InvalidArgumentError (a ValueError): "Invalid configuration at position {position}: ..."
      naming the rule broken (an empty pattern or table; a node without start and stop, with a
      start >= 0, a stop > 0, a stop not after its start, a stop 0 without start, a step without
      start or <= 0; a modulo condition with a modulus <= 0 or a remainder < 0).
    """
    def invalid(message: str):
        return errors.InvalidArgumentError(f"Invalid configuration at position {position}: {message}")

    if not config.flat:
        raise invalid("`flat` must not be empty.")
    if not config.table:
        raise invalid("`table` must not be empty.")
    for node in config.flat:
        has_start, has_stop, has_step = node.HasField("start"), node.HasField("stop"), node.HasField("step")
        if node.flat_source_index < 0:
            raise invalid(f"`flat_source_index` must be >= 0 but got {node.flat_source_index}.")
        if not has_start and not has_stop:
            raise invalid("At least one of `start` and `stop` must be specified.")
        if has_start and node.start >= 0:
            raise invalid(f"`start` must be < 0 but got {node.start}.")
        if has_stop and node.stop > 0:
            raise invalid(f"`stop` must be <= 0 but got {node.stop}.")
        if has_start and has_stop and node.start >= node.stop:
            raise invalid(f"`stop` ({node.stop}) must be > `start` ({node.start}) when both are specified.")
        if has_stop and node.stop == 0 and not has_start:
            raise invalid(f"`stop` must be < 0 when `start` isn't set but got {node.stop}.")
        if has_step and not has_start:
            raise invalid("`step` must only be set when `start` is set.")
        if has_step and node.step <= 0:
            raise invalid(f"`step` must be > 0 but got {node.step}.")
    for condition in config.conditions:
        if condition.cmp == "mod_eq":
            if condition.mod <= 0:
                raise invalid(f"`mod_eq.mod` must be > 0 but got {condition.mod}.")
            if condition.value < 0:
                raise invalid(f"`mod_eq.eq` must be >= 0 but got {condition.value}.")


# -- evaluating configs --------------------------------------------------------------------------

class PatternEngine:
    """Applies configs to a stream of steps: after each append, of a whole step or of part of
    one (and at the end of an episode), it says which configs apply and which buffered entries
    their nodes select. As Reverb's StructuredWriter (structured_writer.cc ApplyConfigs), a
    config applies at most once per step, possibly on a partial step that already has the
    fields it needs, and an append whose step has nothing in the columns the configs read
    applies none.

    Entries are whatever the caller buffers per column (values, cell references); a None entry
    is a field missing in that step, and a config whose pattern selects one is not applied.
    """

    def __init__(self, configs: Sequence[StructuredWriterConfig]):
        if not configs:
            raise errors.InvalidArgumentError("At least one config must be provided.")
        self.configs = list(configs)
        for config in self.configs:
            if not config.flat:
                raise errors.InvalidArgumentError(f"the config for table {config.table!r} has an empty pattern")
        self.history_length = max(config.history_length() for config in self.configs)
        self._buffer: Deque[List[Any]] = collections.deque(maxlen=self.history_length)
        # the columns the configs read (patterns and data conditions)
        self._used = sorted({node.flat_source_index for config in self.configs for node in config.flat}
                            | {c.flat_source_index for config in self.configs for c in config.conditions
                               if c.left == "flat_source_index"})
        self._row_open = False
        self._step_index = -1  # within the episode, for conditions
        self._step_serial = -1  # over the engine's life: a config applies once per step
        self._since_applied = [0] * len(self.configs)
        self._applied_on: List[Optional[int]] = [None] * len(self.configs)
        self._counted_on: List[Optional[int]] = [None] * len(self.configs)

    def clear(self, clear_buffers: bool = True) -> None:
        """Starts a new episode (step index 0 next); `clear_buffers` also forgets the buffered
        steps. Steps since a config was applied keep counting across episodes, and a config
        that applied to the newest buffered step does not apply to it again, as in Reverb."""
        if clear_buffers:
            self._buffer.clear()
        self._row_open = False
        self._step_index = -1

    def append(self, entries: List[Any], values: List[Any],
               partial_step: bool = False) -> List[Tuple[StructuredWriterConfig, list]]:
        """Buffers (part of) a step: `entries` per column, None where this call gives nothing
        (a step left open by a partial append is filled in); `values` are the step's values so
        far, for data conditions. Returns (config, flat selections) for each config to apply now."""
        if self._row_open and self._buffer:
            row = self._buffer[-1]
            for column, entry in enumerate(entries):
                if entry is not None:
                    row[column] = entry
        else:
            self._buffer.append(list(entries))
            self._step_index += 1
            self._step_serial += 1
        self._row_open = partial_step
        return self._apply(values, end_of_episode=False)

    def end_episode(self, values: Optional[List[Any]]) -> List[Tuple[StructuredWriterConfig, list]]:
        """The configs conditioned on the end of the episode that apply now."""
        if not self._buffer:
            return []
        return self._apply(values or [], end_of_episode=True)

    def _apply(self, values, end_of_episode: bool):
        out = []
        buffer = list(self._buffer)
        newest = buffer[-1]
        if all(column >= len(newest) or newest[column] is None for column in self._used):
            return out
        for i, config in enumerate(self.configs):
            if self._applied_on[i] == self._step_serial:
                continue
            if self._counted_on[i] != self._step_serial:
                self._since_applied[i] += 1
                self._counted_on[i] = self._step_serial
            wants_end = any(c.left == "is_end_episode" for c in config.conditions)
            if wants_end != end_of_episode or len(buffer) < config.history_length():
                continue
            if not all(self._holds(c, i, values, end_of_episode, len(buffer)) for c in config.conditions):
                continue
            selections = []
            for node in config.flat:
                column = [step[node.flat_source_index] for step in buffer]
                picked = node.select(column)
                if picked is None or (isinstance(picked, list) and (not picked or any(p is None for p in picked))):
                    break
                selections.append(picked)
            else:
                self._since_applied[i] = 0
                self._applied_on[i] = self._step_serial
                out.append((config, selections))
        return out

    def _holds(self, condition: ConditionProto, i: int, values, end_of_episode: bool, buffered: int) -> bool:
        if condition.left == "step_index":
            lhs = self._step_index
        elif condition.left == "steps_since_applied":
            lhs = self._since_applied[i]
        elif condition.left == "buffer_length":
            lhs = buffered
        elif condition.left == "is_end_episode":
            lhs = int(end_of_episode)
        else:
            index = condition.flat_source_index
            value = values[index] if index < len(values) else None
            if value is None:
                return False
            array = np.asarray(value)
            if array.shape != () or not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
                raise errors.InvalidArgumentError(
                    f"data conditions read scalar integers or bools; column {index} holds "
                    f"{array.dtype} of shape {list(array.shape)}")
            lhs = int(array)
        return condition.holds(lhs)


# -- the writer ----------------------------------------------------------------------------------


class StructuredWriter:
    """Appends steps and inserts the items its configs make (Reverb's StructuredWriter).

    Create it with `Client.structured_writer(configs)`. Every step has the structure of the
    first; a None leaf is a field missing in that step.
    """

    def __init__(self, client, configs: Sequence[StructuredWriterConfig]):
        """Raises: InvalidArgumentError (a ValueError): no configs, or an invalid one
        (`validate_config`)."""
        for position, config in enumerate(configs):
            validate_config(config, position)
        self._engine = PatternEngine(configs)
        self._writer = client.trajectory_writer(self._engine.history_length)
        self._structure = None
        self._num_columns: Optional[int] = None
        self._specs: List[Optional[Tuple[tuple, np.dtype]]] = []
        self._open_step: Optional[List[Any]] = None
        self._last_values: Optional[List[Any]] = None

    @property
    def step_is_open(self) -> bool:
        """True if the last `append` had `partial_step=True`."""
        return self._open_step is not None

    def append(self, data: Any, *, partial_step: bool = False) -> None:
        """Appends (part of) a step and inserts the items of the configs that apply (a config
        whose pattern needs only fields a partial step already has applies to it, as in Reverb;
        each config applies at most once per step).

        Raises:
          ValueError: a structure with a different number of leaves than the first step, a
          field given twice in one step, a dtype or shape differing from the field's first one.
        """
        flat = tree.flatten(data)
        if self._num_columns is None:
            self._num_columns = len(flat)
            self._structure = tree.map_structure(lambda _: None, data)
            self._specs = [None] * len(flat)
        if len(flat) != self._num_columns:
            raise ValueError(f"Flattened data has an unexpected length, got {len(flat)} but wanted "
                             f"{self._num_columns}.")
        given = [None if leaf is None else self._checked(i, leaf) for i, leaf in enumerate(flat)]
        values = given
        if self._open_step is not None:
            for i, value in enumerate(given):
                if value is not None and self._open_step[i] is not None:
                    raise ValueError(f"Field {self._path(i)} has already been set in the active step.")
            values = [o if v is None else v for o, v in zip(self._open_step, given)]
        cells = self._writer.append(list(given), partial_step=partial_step)
        self._open_step = values if partial_step else None
        self._last_values = values
        self._insert(self._engine.append(list(cells), values, partial_step=partial_step))

    def _path(self, i: int):
        return tree.flatten_with_path(self._structure)[i][0]

    def _checked(self, i: int, leaf) -> np.ndarray:
        value = np.asarray(leaf)
        spec = self._specs[i]
        if spec is None:
            self._specs[i] = (value.shape, value.dtype)
            return value
        shape, dtype = spec
        if value.dtype != dtype:
            raise ValueError(f"Tensor of wrong dtype provided for column {i} (path={self._path(i)}). "
                             f"Got {specs.tf_dtype_name(value.dtype)} but expected "
                             f"{specs.tf_dtype_name(dtype)}.")
        if value.shape != shape:
            raise ValueError(f"Tensor of incompatible shape provided for column {i} (path={self._path(i)}). "
                             f"Got {specs.tf_shape_text(value.shape)} which is incompatible with "
                             f"{specs.tf_shape_text(shape)}.")
        return value

    def _insert(self, applied) -> None:
        from replay.trajectory_columns import TrajectoryColumn

        for config, selections in applied:
            columns, flat_values = [], []
            for picked in selections:
                if isinstance(picked, list):
                    columns.append(TrajectoryColumn(picked))
                    flat_values.append(np.stack([cell.value for cell in picked]))
                else:
                    columns.append(TrajectoryColumn([picked], squeeze=True))
                    flat_values.append(picked.value)
            self._writer.create_item(config.table, config.priority.compute(config.flat, flat_values), columns)

    def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None) -> None:
        """Waits until at most `block_until_num_items` items are unconfirmed by the server.

        Raises:
          ValueError: block_until_num_items < 0; DeadlineExceededError: not within `timeout_ms`.
        """
        if block_until_num_items < 0:
            raise ValueError(f"block_until_num_items must be >= 0, got {block_until_num_items}")
        self._writer.flush(block_until_num_items, timeout_ms)

    def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Inserts the items of the configs conditioned on the end of the episode, flushes and
        starts a new episode. An open partial step ends with the episode (as in Reverb: the next
        append starts a step); with `clear_buffers` it goes with the buffers.

        Raises:
          DeadlineExceededError: the flush did not complete within `timeout_ms`.
        """
        self._insert(self._engine.end_episode(self._last_values))
        if self._open_step is not None and not clear_buffers:
            self._writer.append([None] * len(self._open_step))  # completes the step, adds nothing
        self._open_step = None
        self._engine.clear(clear_buffers)
        self._writer.end_episode(clear_buffers, timeout_ms)

    def close(self) -> None:
        self._writer.close()
