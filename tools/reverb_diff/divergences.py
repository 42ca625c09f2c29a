"""The known divergences of `replay.reverb` from Reverb 0.14, each with why it is there, as the
differential tool (run.py) and its CI test (tests/replay/reverb/test_reverb_diff.py) recognise them.

A divergence either concerns one field (`paths`: the differing observables it explains; the
rest of the op and of the sequence is still compared) or a behaviour (`cascades`: once it shows,
what follows in the sequence is a consequence and is not compared). Each has a status:
"kept" (on purpose, listed in the README's "Coming from Reverb") or "open" (not fixed yet; the
entry goes when the fix lands and the differential run shows the sequences agree).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, List, Tuple


@dataclasses.dataclass(frozen=True)
class Divergence:
    name: str
    status: str  # "kept" or "open"
    reason: str
    # (sequence, difference) -> whether this divergence explains the difference
    matches: Callable[[Dict[str, Any], Dict[str, Any]], bool]
    cascades: bool = False
    # For a field divergence: the differing paths it explains (suffixes of the difference's paths).
    paths: Tuple[str, ...] = ()


def _field(*suffixes: str):
    def matches(_sequence, difference):
        return all(any(p.endswith(s) for s in suffixes) for p in difference["paths"])
    return matches












def _legacy_writer_dtype(sequence, difference) -> bool:
    cast_before = any(op["op"] == "w_append" and "cast" in op for op in sequence["ops"][:difference["index"] + 1])
    return difference["op"]["op"] == "w_append" and cast_before and "error" in (difference["ours"] or {})








def _legacy_item_reverb_cannot_sample(sequence, difference) -> bool:
    """Reverb's legacy Writer, after a flush in the episode: its sampler fails on an item its
    writer made (ValueError 'Cannot slice (-k, n) ...'), or its writer takes an item of more
    timesteps than the episode holds, which replay refuses."""
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    op = difference["op"]["op"]
    flushed = any(o["op"] == "w_flush" for o in sequence["ops"][:difference["index"]])
    if op == "drain":
        return re.match(r"Cannot slice \(-\d+, ", reverb.get("message", "")) is not None and "ok" in ours
    if op == "w_item":
        return flushed and "ok" in reverb and "larger than number of buffered timesteps" in ours.get("message", "")
    return False


def _close_waited(_sequence, difference) -> bool:
    return difference["op"]["op"] == "tw_close" and difference["paths"] == [".ok.waited"]




def _structured_field_twice(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "sw_append" and "already been set" in ours.get("message", "")
            and ("provided by multiple" in reverb.get("message", "")
                 or "present in previous AppendPartial" in reverb.get("message", "") or "ok" in reverb))


def _strided_pattern_after_partial_steps(sequence, difference) -> bool:
    """A drained item's data differs, the writer has a strided pattern (a slice step over 1)
    and partial appends came before: Reverb's item holds another step's cell there."""
    if difference["op"]["op"] != "drain" or not all(".data" in path for path in difference["paths"]):
        return False
    ops = sequence["ops"][:difference["index"]]
    strided = any(isinstance(ref, list) and isinstance(ref[1], dict) and (ref[1].get("step") or 1) > 1
                  for op in ops if op["op"] == "sw_open" for config in op["configs"]
                  for ref in config["pattern"].values())
    return strided and any(op["op"] == "sw_append" and op.get("partial") for op in ops)


def _stop_only_slice_into_expired_steps(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "item" and reverb.get("error") == "TypeError"
            and "'NoneType' object is not iterable" in reverb.get("message", "")
            and "None data references" in ours.get("message", ""))




def _modulo_comparison_refused(sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "sw_open" and "ok" in reverb
            and "modulo condition can only be compared" in ours.get("message", ""))






def _refs_at_length(sequence, difference) -> bool:
    """Whether an item op uses a non-negative index, list entry or slice bound at or past its
    column's history length (as Reverb reported it before the op)."""
    if difference["op"]["op"] != "item":
        return False
    lengths = difference.get("history", {})
    for column, index in difference["op"].get("trajectory", {}).values():
        # (a column first given after the last reported append has the same length: Reverb
        # backfills new columns)
        length = lengths.get(column, max(lengths.values(), default=None))
        if length is None:
            continue
        if isinstance(index, dict):
            bounds = [index.get("start"), index.get("stop")]
        else:
            bounds = index if isinstance(index, list) else [index]
        if any(b is not None and b >= length for b in bounds):
            return True
    return False


def _repeated_step_unsampleable(sequence, difference) -> bool:
    reverb = difference["reverb"] or {}
    if difference["op"]["op"] != "drain" or "Cannot slice" not in reverb.get("message", ""):
        return False
    # (a list can repeat a step through different indices: [0, -3] of four steps)
    return any(isinstance(index, list) and len(index) > 1
               for op in sequence["ops"][:difference["index"]] if op["op"] == "item"
               for _column, index in op.get("trajectory", {}).values())


def _failed_append_defined_column(sequence, difference) -> bool:
    """Reverb refuses what replay takes after an append Reverb refused (both do, for a cast or
    mismatched column): a later append of a column that refused append carried (Reverb fixed
    its dtype then), or an item of a kept step (Reverb's refused append kept its other fields'
    cells, which took keep-alive slots, so an older step's cells expired)."""
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    if "ok" not in ours:
        return False
    message = reverb.get("message", "")
    writer = difference["op"].get("w", 0)
    earlier = [op for op in sequence["ops"][:difference["index"]]
               if op["op"] == "append" and op.get("cast") and op.get("w", 0) == writer]
    refused = difference.get("refused_appends", [])
    match = re.search(r"wrong dtype provided for column \('([^']+)',\)", message)
    if difference["op"]["op"] == "append" and match:
        return any(match.group(1) in op["step"] for op in earlier + refused)
    if difference["op"]["op"] == "item" and "expired CellRef" in message:
        return any(len(op["step"]) > 1 for op in refused)
    return False


def _append_after_clearing_open_step(sequence, difference) -> bool:
    reverb = difference["reverb"] or {}
    if difference["op"]["op"] != "append" or "has already been set" not in reverb.get("message", ""):
        return False
    # (whether the step was still open when the episode ended depends on which appends failed,
    # which the ops alone do not say: a partial append since the last clearing is enough here)
    writer = difference["op"].get("w", 0)
    partial_since_cleared = False
    for op in sequence["ops"][:difference["index"]]:
        if op.get("w", 0) != writer:
            continue
        if op["op"] == "append" and op.get("partial"):
            partial_since_cleared = True
        elif op["op"] == "end_episode" and op.get("clear_buffers", True):
            if partial_since_cleared:
                return True
        elif op["op"] == "tw_open":
            partial_since_cleared = False
    return False


DIVERGENCES: List[Divergence] = [
    Divergence(
        name="history_index_at_length",
        status="kept",
        reason="A non-negative history index or slice bound at or past the history's length (one append, "
               "history['a'][1], history['a'][1:], history['a'][4:2]; three appends, history['a'][:4]): "
               "Reverb's _ColumnHistory._slice subtracts the length and indexes its kept cells with the "
               "result, so [1] is the oldest kept step, [1:] all of them, [4:2] two None references and "
               "[:4] only the oldest kept step; replay indexes like a list, as that code means to ('as if "
               "_data_references wasn't limited in size'): [1] raises IndexError, [1:] and [4:2] are empty "
               "(create_item refuses them, ValueError), and [:4] is every kept step.",
        matches=_refs_at_length, cascades=True),
    Divergence(
        name="repeated_step_unsampleable",
        status="kept",
        reason="An item whose column repeats one step (num_keep_alive_refs=3, append, append(partial_step="
               "True), create_item(history['a'][[-2, -2, -2]]); or [0, -3] of four steps): Reverb accepts "
               "the item but cannot sample it (ValueError: 'Cannot slice (0, 3) out of tensor with shape "
               "[1,2]'); replay samples the repeated step as often as the item names it.",
        matches=_repeated_step_unsampleable, cascades=True),
    Divergence(
        name="refused_append_defines_columns",
        status="kept",
        reason="An append Reverb refuses for one column's dtype or shape still has effects: it fixes the "
               "dtypes of the new columns it carried (append({'c': uint8}), end_episode(), append({'b': int32, "
               "'c': float32}) -> ValueError for c, then append({'b': uint8}) -> ValueError 'expected int32'), "
               "and a refused append keeps the cells of its other fields, which take keep-alive slots "
               "(num_keep_alive_refs=2, two appends, append({'a': 3, 'b': [3, 3, 3]}, partial_step=True) -> "
               "ValueError for b, append({'a': 4}), then an item of history['a'][-2] -> ValueError 'expired "
               "CellRef'); replay's refused append changes nothing, so the later call is taken.",
        matches=_failed_append_defined_column, cascades=True),
    Divergence(
        name="open_step_cleared_by_end_episode",
        status="kept",
        reason="end_episode(clear_buffers=True) while a partial step is open: replay drops the open step with "
               "the history; Reverb's Python writer empties the history but still takes the step as open, so "
               "every later append of a field that step had raises ValueError ('... has already been set in "
               "the active step') for the rest of the writer's life.",
        matches=_append_after_clearing_open_step, cascades=True),
    Divergence(
        name="close_waits_for_held_items",
        status="kept",
        reason="TrajectoryWriter.close() with items a rate limiter holds back (Table.stack('t0', 2), four "
               "items, flush(timeout_ms=200) -> DeadlineExceededError, close()): replay's close sends the items "
               "already created and waits a few seconds (about 5) for the server to take them before it "
               "cancels; Reverb's cancels its stream at once and drops every item not yet confirmed. replay "
               "keeps created items where it can (close(cancel=True) is Reverb's immediate close).",
        matches=_close_waited),
    Divergence(
        name="strided_pattern_after_partial_steps",
        status="kept",
        reason="A StructuredWriter with configs a[-1:] and a[-3::2] over steps some of which were built by "
               "partial appends (reverb_diff structured_writer, seed 2026, sequence 953): at step 9 Reverb's "
               "item of a[-3::2] holds steps 7 and 8; the pattern means steps 7 and 9, which replay's holds "
               "(every other item of the sequence agrees, and a shorter sequence of the same kind agrees on "
               "both sides, so Reverb's mix-up needs that sequence's partial steps).",
        matches=_strided_pattern_after_partial_steps, cascades=True),
    Divergence(
        name="structured_field_set_twice",
        status="kept",
        reason="StructuredWriter.append giving a field the open (partial) step already has: replay raises "
               "ValueError ('Field ... has already been set in the active step', as Reverb's TrajectoryWriter); "
               "Reverb's StructuredWriter raises RuntimeError ('... should never happen, please contact the "
               "Reverb team') or, when the step's other fields are still missing, takes it.",
        matches=_structured_field_twice, cascades=True),
    Divergence(
        name="modulo_condition_comparisons",
        status="kept",
        reason="A modulo condition compared with <, <=, > or >= (Condition.step_index() % 3 >= 2): Reverb "
               "takes it and drops the modulus (eq, ge and mod_eq are one proto oneof, so setting ge clears "
               "mod_eq: the condition is step_index >= 2); replay refuses it (ValueError: 'a modulo condition "
               "can only be compared with == or !=') rather than insert items the config does not describe.",
        matches=_modulo_comparison_refused, cascades=True),
    Divergence(
        name="stop_only_slice_into_expired_steps",
        status="kept",
        reason="An item from a slice with only a stop that reaches expired steps (num_keep_alive_refs=1, "
               "history['a'][:-3] after four appends): Reverb fails inside its own column code (TypeError: "
               "'NoneType' object is not iterable); replay raises the error Reverb gives for every other "
               "expired reference (ValueError: 'TrajectoryColumns cannot contain any None data references').",
        matches=_stop_only_slice_into_expired_steps),
    Divergence(
        name="legacy_writer_step_specs",
        status="kept",
        reason="The legacy Writer refuses a step whose dtype or shape differs from the first step's at append "
               "(InvalidArgumentError); Reverb takes it, then fails when the chunk is built, loses the chunk's "
               "items or hangs in close (so the generator no longer draws such steps).",
        matches=_legacy_writer_dtype, cascades=True),
    Divergence(
        name="legacy_writer_items_reverb_cannot_sample",
        status="kept",
        reason="Reverb's legacy Writer after a flush within an episode (max_sequence_length=3: four appends, "
               "create_item(num_timesteps=1), append, flush, create_item(num_timesteps=3), close) makes items "
               "its own sampler cannot read (ValueError 'Cannot slice (-1, 2) out of tensor with shape [2,2]' "
               "when the item is sampled; replay samples the item's three steps), and takes "
               "create_item(num_timesteps=2) when the episode holds one step (its count is of whole chunks), an "
               "item that fails the same way; replay refuses it at create_item (InvalidArgumentError).",
        matches=_legacy_item_reverb_cannot_sample, cascades=True),
]


def classify(sequence: Dict[str, Any], differences: List[Dict[str, Any]]) -> Dict[str, List]:
    """Splits a sequence's differences (in op order) into the names of the known divergences that
    explain them and the first difference none explains (a list of at most one: what follows an
    unexplained difference is not trusted). A cascading divergence ends the comparison."""
    known: List[str] = []
    unknown: List[Dict[str, Any]] = []
    for difference in differences:
        remaining = list(difference["paths"])
        cascaded = False
        for divergence in DIVERGENCES:
            if divergence.paths:
                explained = [p for p in remaining if any(p.endswith(s) for s in divergence.paths)]
                if explained:
                    remaining = [p for p in remaining if p not in explained]
                    if divergence.name not in known:
                        known.append(divergence.name)
            elif divergence.matches(sequence, difference):
                if divergence.name not in known:
                    known.append(divergence.name)
                remaining = []
                cascaded = divergence.cascades
                break
        if remaining:
            unknown.append(dict(difference, paths=remaining))
            break
        if cascaded:
            break
    return {"known": known, "unknown": unknown}
