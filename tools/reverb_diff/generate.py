"""The differential tool's generator: hypothesis strategies that draw operation sequences, one
family of Reverb's API at a time, reproducibly from a seed.

A sequence is a JSON object: `tables` (each a name and its configuration: sampler, remover,
max_size, max_times_sampled, rate_limiter, optional signature, or kind "queue"/"stack"),
`columns` (name -> [dtype, shape] of the data its steps hold) and `ops`, the calls in order
(executor.py runs them; each op names its call in `op`). Data is described, not stored: a step
is `{column: tag}` and the executor builds the arrays from the tags (`executor.step_value`), so
the id of an item is readable from its data on both sides.

Families (FAMILIES): selectors, rate_limiters, distribution, blocking, trajectory_writer, writer,
structured_writer, client, datasets.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

SELECTORS = ["Fifo", "Lifo", "Uniform", "Prioritized", "MaxHeap", "MinHeap"]
DETERMINISTIC = ["Fifo", "Lifo", "MaxHeap", "MinHeap"]
PRIORITIES = [0.0, 0.5, 1.0, 2.0, 3.0]
DTYPES = ["int32", "int64", "float32", "float64", "uint8"]
# Long enough never to expire on a loaded machine where nothing blocks (a MinSize table).
NO_BLOCK_TIMEOUT_MS = 20_000

Sequence = Dict[str, Any]


def _selector(draw, kinds=SELECTORS):
    kind = draw(st.sampled_from(kinds))
    if kind == "Prioritized":
        return [kind, draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]))]
    return [kind]


def _priority(draw):
    # No negative priorities: Reverb 0.14's table worker stops for good on one ("Table worker
    # encountered a fatal error: Priority must not be negative") and the table's next call hangs.
    return draw(st.sampled_from(PRIORITIES))


@st.composite
def selectors_sequence(draw) -> Sequence:
    """One table, any sampler and remover, MinSize; inserts, samples, priority updates and
    deletes, resets, info. Deletes only where the sampler and remover are deterministic (keys are
    learnt by sampling, so elsewhere the two sides would know different keys)."""
    sampler = _selector(draw)
    remover = _selector(draw)
    deterministic = sampler[0] in DETERMINISTIC and remover[0] in DETERMINISTIC
    # Where chance picks the item sampled or evicted, max_times_sampled would let it decide the
    # table's size too; without it sizes, blocking and counts stay comparable.
    table = {"name": "t0", "sampler": sampler, "remover": remover, "max_size": draw(st.integers(1, 5)),
             "max_times_sampled": draw(st.integers(0, 3)) if deterministic else 0,
             "rate_limiter": ["MinSize", draw(st.integers(1, 3))]}
    ops: List[Dict[str, Any]] = []
    next_id = 1
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["insert"] * 4 + ["sample"] * 3 + ["mutate", "info", "can", "reset"]))
        if kind == "insert":
            ops.append({"op": "insert", "step": {"id": next_id}, "priorities": {"t0": _priority(draw)}})
            next_id += 1
        elif kind == "sample":
            ops.append({"op": "sample", "table": "t0", "num_samples": draw(st.integers(1, 3)),
                        "emit_timesteps": draw(st.booleans())})
        elif kind == "mutate":
            ids = st.integers(1, max(1, next_id))
            updates = draw(st.dictionaries(ids.map(str), st.sampled_from(PRIORITIES), max_size=2))
            deletes = draw(st.lists(ids, max_size=2, unique=True)) if deterministic else []
            ops.append({"op": "mutate", "table": "t0", "updates": updates, "deletes": deletes})
        elif kind == "info":
            ops.append({"op": "info", "tables": ["t0"]})
        elif kind == "can":
            ops.append({"op": "can", "table": "t0", "n": draw(st.integers(1, 3))})
        else:
            ops.append({"op": "reset", "table": "t0"})
    ops.append({"op": "info", "tables": ["t0"]})
    return {"tables": [table], "ops": ops}


@st.composite
def _rate_limiter(draw):
    kind = draw(st.sampled_from(["MinSize", "SampleToInsertRatio", "SampleToInsertRatio", "Queue", "Stack"]))
    if kind == "MinSize":
        return ["MinSize", draw(st.integers(0, 3))]
    if kind in ("Queue", "Stack"):
        return [kind, draw(st.integers(1, 4))]
    samples_per_insert = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0]))
    error_buffer = draw(st.one_of(st.sampled_from([0.5, 1.0, 2.0, 3.5, 6.0]),
                                  st.tuples(st.sampled_from([-2.0, 0.0, 1.0]),
                                            st.sampled_from([1.0, 3.0, 10.0])).map(list)))
    return ["SampleToInsertRatio", samples_per_insert, draw(st.integers(1, 3)), error_buffer]


@st.composite
def rate_limiters_sequence(draw) -> Sequence:
    """One table under MinSize, SampleToInsertRatio, Queue or Stack (also Table.queue/stack);
    inserts and samples until the limiter refuses, `can_sample`/`can_insert` of 1-3, info."""
    table_kind = draw(st.sampled_from(["table"] * 4 + ["queue", "stack"]))
    if table_kind == "table":
        table = {"name": "t0", "sampler": _selector(draw, DETERMINISTIC), "remover": _selector(draw, ["Fifo", "Lifo"]),
                 "max_size": draw(st.integers(1, 6)), "max_times_sampled": draw(st.integers(0, 2)),
                 "rate_limiter": draw(_rate_limiter())}
    else:
        table = {"name": "t0", "kind": table_kind, "max_size": draw(st.integers(1, 4))}
    ops: List[Dict[str, Any]] = []
    next_id = 1
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["insert"] * 4 + ["sample"] * 4 + ["can", "info", "reset"]))
        if kind == "insert":
            for _ in range(draw(st.integers(1, 3))):
                ops.append({"op": "insert", "step": {"id": next_id}, "priorities": {"t0": 1.0}})
                next_id += 1
        elif kind == "sample":
            ops.append({"op": "sample", "table": "t0", "num_samples": draw(st.integers(1, 3))})
        elif kind == "can":
            ops.append({"op": "can", "table": "t0", "n": draw(st.integers(1, 3))})
        elif kind == "info":
            ops.append({"op": "info", "tables": ["t0"]})
        else:
            ops.append({"op": "reset", "table": "t0"})
    ops.append({"op": "info", "tables": ["t0"]})
    return {"tables": [table], "ops": ops}


@st.composite
def distribution_sequence(draw) -> Sequence:
    """A Uniform or Prioritized table of 1-6 items with priorities (zeros among them): many samples,
    compared with the distribution Reverb's selectors define (not draw by draw), then priority
    updates of the items seen and many samples again."""
    sampler = draw(st.sampled_from([["Uniform"], ["Prioritized", 1.0], ["Prioritized", 0.5], ["Prioritized", 2.0],
                                    ["Prioritized", 0.0]]))
    table = {"name": "t0", "sampler": sampler, "remover": ["Fifo"], "max_size": 10, "max_times_sampled": 0,
             "rate_limiter": ["MinSize", 1]}
    count = draw(st.integers(1, 6))
    priorities = [draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 5.0])) for _ in range(count)]
    ops: List[Dict[str, Any]] = [{"op": "insert", "step": {"id": i + 1}, "priorities": {"t0": p}}
                                 for i, p in enumerate(priorities)]
    ops.append({"op": "distribution", "table": "t0", "n": 200})
    updates = draw(st.dictionaries(st.integers(1, count).map(str), st.sampled_from([0.0, 1.0, 4.0]), max_size=3))
    ops.append({"op": "mutate", "table": "t0", "updates": updates})
    ops.append({"op": "distribution", "table": "t0", "n": 200})
    return {"tables": [table], "ops": ops, "priorities": priorities}


def _columns(draw, count=None):
    count = count or draw(st.integers(1, 3))
    names = ["a", "b", "c"][:count]
    shapes = st.sampled_from([[], [], [2], [1, 3]])
    return {name: [draw(st.sampled_from(DTYPES)), draw(shapes)] for name in names}


@st.composite
def _history_ref(draw, columns):
    column = draw(st.sampled_from(sorted(columns)))
    form = draw(st.sampled_from(["int", "int", "slice", "slice", "list"]))
    if form == "int":
        return [column, draw(st.integers(-4, 4))]
    if form == "list":
        return [column, draw(st.lists(st.integers(-3, 3), min_size=1, max_size=3))]
    bound = st.one_of(st.none(), st.integers(-4, 4))
    step = st.sampled_from([None, None, None, 1, 2])
    return [column, {"start": draw(bound), "stop": draw(bound), "step": draw(step)}]


@st.composite
def trajectory_writer_sequence(draw) -> Sequence:
    """TrajectoryWriter: full and partial steps (some of a wrong dtype), items built from history
    indices of both signs, slices and index lists, flush, end_episode with and without clearing
    the buffers; the table (a queue-like Fifo table, signed in some sequences) drained after
    each flush. Nothing here blocks, so flushes take a long timeout."""
    columns = _columns(draw)
    signed = draw(st.integers(0, 3)) == 0
    table = {"name": "t0", "sampler": ["Fifo"], "remover": ["Fifo"], "max_size": 100, "max_times_sampled": 1,
             "rate_limiter": ["MinSize", 1]}
    if signed:
        table["signature"] = columns
    ops: List[Dict[str, Any]] = [{"op": "tw_open", "num_keep_alive_refs": draw(st.integers(1, 4))}]
    tag = 1
    for _ in range(draw(st.integers(1, 20))):
        kind = draw(st.sampled_from(["append"] * 5 + ["item"] * 4 + ["flush", "end_episode", "info"]))
        if kind == "append":
            present = draw(st.lists(st.sampled_from(sorted(columns)), min_size=1, unique=True))
            op = {"op": "append", "step": {c: tag for c in sorted(present)}, "partial": draw(st.integers(0, 3)) == 0}
            if draw(st.integers(0, 15)) == 0:
                column = present[0]
                op["cast"] = {column: [draw(st.sampled_from(DTYPES)), draw(st.sampled_from([[], [2], [3]]))]}
            ops.append(op)
            tag += 1
        elif kind == "item":
            refs = draw(st.lists(_history_ref(columns), min_size=1, max_size=2))
            ops.append({"op": "item", "table": "t0", "priority": _priority(draw),
                        "trajectory": {f"x{i}": ref for i, ref in enumerate(refs)}})
        elif kind == "flush":
            ops.append({"op": "flush", "timeout_ms": NO_BLOCK_TIMEOUT_MS})
            ops.append({"op": "drain", "table": "t0"})
        elif kind == "end_episode":
            ops.append({"op": "end_episode", "clear_buffers": draw(st.booleans()), "timeout_ms": NO_BLOCK_TIMEOUT_MS})
            ops.append({"op": "drain", "table": "t0"})
        else:
            # Before a flush Reverb sends an item only once its chunks are complete, replay
            # sooner: what a table holds is compared after flushes only.
            ops += [{"op": "flush", "timeout_ms": NO_BLOCK_TIMEOUT_MS}, {"op": "info", "tables": ["t0"]}]
    ops += [{"op": "flush", "timeout_ms": NO_BLOCK_TIMEOUT_MS}, {"op": "drain", "table": "t0"},
            {"op": "info", "tables": ["t0"]}]
    return {"tables": [table], "columns": columns, "ops": ops}


@st.composite
def writer_sequence(draw) -> Sequence:
    """The legacy Writer: append, append_sequence, create_item over the last num_timesteps steps,
    flush, close (which ends the episode) and a new writer; the table drained after each flush."""
    columns = _columns(draw)
    table = {"name": "t0", "sampler": ["Fifo"], "remover": ["Fifo"], "max_size": 100, "max_times_sampled": 1,
             "rate_limiter": ["MinSize", 1]}
    ops: List[Dict[str, Any]] = [{"op": "w_open", "max_sequence_length": draw(st.integers(1, 4))}]
    tag = 1
    open_writer = True
    for _ in range(draw(st.integers(1, 20))):
        kind = draw(st.sampled_from(["append"] * 4 + ["sequence", "item", "item", "flush", "close"]))
        if not open_writer:
            ops.append({"op": "w_open", "max_sequence_length": draw(st.integers(1, 4))})
            open_writer = True
        if kind == "append":
            # No step of another dtype or shape: Reverb's legacy Writer takes it, then loses the
            # chunk's items or hangs in close (divergences.py, legacy_writer_step_specs).
            ops.append({"op": "w_append", "step": {c: tag for c in columns}})
            tag += 1
        elif kind == "sequence":
            length = draw(st.integers(1, 3))
            ops.append({"op": "w_append_sequence", "steps": [{c: tag + i for c in columns} for i in range(length)]})
            tag += length
        elif kind == "item":
            ops.append({"op": "w_item", "table": "t0", "num_timesteps": draw(st.integers(0, 5)),
                        "priority": _priority(draw)})
        elif kind == "flush":
            ops += [{"op": "w_flush"}, {"op": "drain", "table": "t0"}, {"op": "info", "tables": ["t0"]}]
        else:
            ops += [{"op": "w_close"}, {"op": "drain", "table": "t0"}, {"op": "info", "tables": ["t0"]}]
            open_writer = False
    if open_writer:
        ops.append({"op": "w_close"})
    ops += [{"op": "drain", "table": "t0"}, {"op": "info", "tables": ["t0"]}]
    return {"tables": [table], "columns": columns, "ops": ops}


@st.composite
def client_sequence(draw) -> Sequence:
    """Client: inserts of multi-column steps into one or two tables at once, sample (as timesteps
    or not), mutate_priorities (updates and deletes), reset, checkpoint, server_info."""
    columns = dict(_columns(draw), a=["int64", []])  # the item's id is its first value
    tables = [{"name": name, "sampler": _selector(draw, DETERMINISTIC), "remover": _selector(draw, DETERMINISTIC),
               "max_size": draw(st.integers(1, 6)), "max_times_sampled": draw(st.integers(0, 2)),
               "rate_limiter": ["MinSize", 1]} for name in ("t0", "t1")]
    ops: List[Dict[str, Any]] = []
    tag = 1
    names = st.sampled_from(["t0", "t1"])
    for _ in range(draw(st.integers(1, 20))):
        kind = draw(st.sampled_from(["insert"] * 4 + ["sample"] * 3 + ["mutate", "reset", "checkpoint", "info"]))
        if kind == "insert":
            targets = draw(st.lists(names, min_size=1, max_size=2, unique=True))
            ops.append({"op": "insert", "step": {c: tag for c in columns},
                        "priorities": {t: _priority(draw) for t in sorted(targets)}})
            tag += 1
        elif kind == "sample":
            ops.append({"op": "sample", "table": draw(names), "num_samples": draw(st.integers(1, 2)),
                        "emit_timesteps": draw(st.booleans())})
        elif kind == "mutate":
            ids = st.integers(1, max(1, tag))
            ops.append({"op": "mutate", "table": draw(names),
                        "updates": draw(st.dictionaries(ids.map(str), st.sampled_from(PRIORITIES), max_size=2)),
                        "deletes": draw(st.lists(ids, max_size=2, unique=True))})
        elif kind == "reset":
            ops.append({"op": "reset", "table": draw(names)})
        elif kind == "checkpoint":
            ops.append({"op": "checkpoint"})
        else:
            ops.append({"op": "info", "tables": ["t0", "t1"]})
    ops.append({"op": "info", "tables": ["t0", "t1"]})
    return {"tables": tables, "columns": columns, "ops": ops}


# Long enough for an insert the limiter allows to land on a loaded machine, short enough that
# the flushes the limiter refuses (DeadlineExceededError) keep a sequence under a second or two.
BLOCKING_TIMEOUT_MS = 200


@st.composite
def blocking_sequence(draw) -> Sequence:
    """What blocks and what returns: a TrajectoryWriter inserting into a table whose limiter
    (Queue, Stack, SampleToInsertRatio, MinSize) refuses inserts; flush and end_episode with short
    timeouts (DeadlineExceededError), one sample at a time between flushes (before a flush, Reverb
    sends an item once its chunk is complete, replay sooner; a sample may let a waiting item in),
    `can_sample`/`can_insert` and info after flushes only (an item the limiter held lands whenever
    a sample frees it), close at the end (whether it waits)."""
    table_kind = draw(st.sampled_from(["queue", "stack", "table", "table"]))
    if table_kind == "table":
        table = {"name": "t0", "sampler": _selector(draw, ["Fifo", "Lifo"]), "remover": ["Fifo"],
                 "max_size": draw(st.integers(2, 6)), "max_times_sampled": draw(st.integers(0, 2)),
                 "rate_limiter": draw(_rate_limiter())}
    else:
        table = {"name": "t0", "kind": table_kind, "max_size": draw(st.integers(1, 3))}
    ops: List[Dict[str, Any]] = [{"op": "tw_open", "num_keep_alive_refs": 1}]
    flush = {"op": "flush", "timeout_ms": BLOCKING_TIMEOUT_MS}
    tag = 1
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["write"] * 4 + ["sample"] * 3 + ["flush", "end_episode", "look"]))
        if kind == "write":
            for _ in range(draw(st.integers(1, 2))):
                ops += [{"op": "append", "step": {"id": tag}},
                        {"op": "item", "table": "t0", "priority": 1.0, "trajectory": {"x": ["id", -1]}}]
                tag += 1
        elif kind == "sample":
            ops += [dict(flush), {"op": "sample", "table": "t0", "num_samples": 1}, dict(flush)]
        elif kind == "flush":
            ops.append(dict(flush))
        elif kind == "end_episode":
            ops.append({"op": "end_episode", "clear_buffers": draw(st.booleans()), "timeout_ms": BLOCKING_TIMEOUT_MS})
        else:
            ops += [dict(flush), {"op": "can", "table": "t0", "n": draw(st.integers(1, 2))},
                    {"op": "info", "tables": ["t0"]}]
    ops += [dict(flush), {"op": "info", "tables": ["t0"]}, {"op": "tw_close"}]
    return {"tables": [table], "ops": ops}


@st.composite
def _condition(draw, columns):
    kind = draw(st.sampled_from(["step_index", "steps_since_applied", "is_end_episode", "data"]))
    if kind == "is_end_episode":
        return ["is_end_episode"]
    comparison = draw(st.sampled_from(["__eq__", "__ne__", "__gt__", "__ge__", "__lt__", "__le__"]))
    mod = draw(st.sampled_from([None, None, 2, 3]))
    if kind == "data":
        scalar_ints = sorted(c for c, (dtype, shape) in columns.items() if shape == [] and "int" in dtype)
        if not scalar_ints:
            return ["step_index", mod, comparison, draw(st.integers(0, 4))]
        return ["data", draw(st.sampled_from(scalar_ints)), mod, comparison, draw(st.sampled_from([0, 1, 200, 300]))]
    return [kind, mod, comparison, draw(st.integers(0, 4))]


@st.composite
def _pattern_ref(draw, columns):
    column = draw(st.sampled_from(sorted(columns)))
    if draw(st.booleans()):
        return [column, draw(st.integers(-3, -1))]
    start = draw(st.integers(-4, -1))
    return [column, {"start": start, "stop": draw(st.sampled_from([None, None, start + 1, -1])),
                     "step": draw(st.sampled_from([None, None, 2]))}]


@st.composite
def structured_writer_sequence(draw) -> Sequence:
    """StructuredWriter: one or two configs (patterns of negative history indices and slices,
    conditions on step_index, steps_since_applied, is_end_episode and the step's data), full and
    partial steps, flush and end_episode; the table drained after each."""
    columns = _columns(draw)
    if draw(st.booleans()):
        columns["k"] = ["int64", []]
    table = {"name": "t0", "sampler": ["Fifo"], "remover": ["Fifo"], "max_size": 100, "max_times_sampled": 1,
             "rate_limiter": ["MinSize", 1]}
    configs = [{"table": "t0",
                "pattern": {f"x{i}": draw(_pattern_ref(columns)) for i in range(draw(st.integers(1, 2)))},
                "conditions": draw(st.lists(_condition(columns), max_size=2))}
               for _ in range(draw(st.integers(1, 2)))]
    ops: List[Dict[str, Any]] = [{"op": "sw_open", "configs": configs}]
    tag = 1
    for _ in range(draw(st.integers(1, 15))):
        kind = draw(st.sampled_from(["append"] * 6 + ["flush", "end_episode"]))
        if kind == "append":
            partial = draw(st.integers(0, 4)) == 0
            present = sorted(columns) if not partial else draw(
                st.lists(st.sampled_from(sorted(columns)), min_size=1, unique=True))
            ops.append({"op": "sw_append", "step": {c: tag for c in sorted(present)}, "partial": partial})
            if partial:
                rest = [c for c in sorted(columns) if c not in present]
                if rest:
                    ops.append({"op": "sw_append", "step": {c: tag for c in rest}, "partial": False})
            tag += 1
        elif kind == "flush":
            ops += [{"op": "sw_flush", "timeout_ms": NO_BLOCK_TIMEOUT_MS}, {"op": "drain", "table": "t0"}]
        else:
            ops += [{"op": "sw_end_episode", "clear_buffers": draw(st.booleans()), "timeout_ms": NO_BLOCK_TIMEOUT_MS},
                    {"op": "drain", "table": "t0"}]
    ops += [{"op": "sw_flush", "timeout_ms": NO_BLOCK_TIMEOUT_MS}, {"op": "drain", "table": "t0"},
            {"op": "info", "tables": ["t0"]}]
    return {"tables": [table], "columns": columns, "ops": ops}


@st.composite
def datasets_sequence(draw) -> Sequence:
    """TrajectoryDataset and TimestepDataset from the tables' signatures: items of the last L steps
    written with a TrajectoryWriter into a trajectory-signed and a timestep-signed queue-like
    table, then take(n) of each dataset (n beyond what the table holds ends it on the rate
    limiter's timeout), one dataset per table, at the end (a dataset samples ahead of what it
    yields)."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from([[], [2]]))
    length = draw(st.integers(1, 3))
    tables = [{"name": name, "sampler": ["Fifo"], "remover": ["Fifo"], "max_size": 100, "max_times_sampled": 1,
               "rate_limiter": ["MinSize", 1],
               "signature": {"x": [dtype, ([length] if name == "traj" else []) + shape]}}
              for name in ("traj", "step")]
    ops: List[Dict[str, Any]] = [{"op": "tw_open", "num_keep_alive_refs": length}]
    for tag in range(1, draw(st.integers(length, length + 5)) + 1):
        ops.append({"op": "append", "step": {"a": tag}})
        if tag >= length:
            for name in ("traj", "step"):
                if draw(st.integers(0, 2)):
                    ops.append({"op": "item", "table": name, "priority": 1.0,
                                "trajectory": {"x": ["a", {"start": -length}]}})
    ops += [{"op": "flush", "timeout_ms": NO_BLOCK_TIMEOUT_MS}, {"op": "info", "tables": ["traj", "step"]}]
    for kind, name in (("trajectory", "traj"), ("timestep", "step")):
        ops.append({"op": "dataset", "kind": kind, "table": name, "take": draw(st.integers(1, 8)),
                    "max_in_flight": draw(st.integers(1, 3)), "timeout_ms": 300})
    return {"tables": tables, "columns": {"a": [dtype, shape]}, "ops": ops}


FAMILIES: Dict[str, Callable[[], st.SearchStrategy]] = {
    "datasets": datasets_sequence,
    "structured_writer": structured_writer_sequence,
    "blocking": blocking_sequence,
    "selectors": selectors_sequence,
    "rate_limiters": rate_limiters_sequence,
    "distribution": distribution_sequence,
    "trajectory_writer": trajectory_writer_sequence,
    "writer": writer_sequence,
    "client": client_sequence,
}


# Hypothesis slows down as one run's examples grow into the tens of thousands; sequences are
# drawn in runs of this many, each with its own seed derived from the caller's.
_RUN = 500


def generate(family: str, count: int, random_seed: int) -> List[Sequence]:
    """`count` sequences of `family`, the same for the same seed (and hypothesis version).

    Raises:
      KeyError: an unknown family.
    """
    strategy = FAMILIES[family]()
    drawn: List[Sequence] = []
    for run in range((count + _RUN - 1) // _RUN):
        wanted = min(_RUN, count - len(drawn))
        batch: List[Sequence] = []

        @seed(random_seed * 100_003 + run)
        @settings(max_examples=wanted, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(sequence):
            batch.append(sequence)

        collect()
        drawn += batch[:wanted]
    for index, sequence in enumerate(drawn):
        sequence["family"] = family
        sequence["index"] = index
    return drawn
