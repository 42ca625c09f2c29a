"""The known divergences of `replay.reverb` from Reverb 0.14, each with why it is there, as the
differential tool (run.py) and its CI test (tests/replay/test_reverb_diff.py) recognise them.

A divergence either concerns one field (`paths`: the differing observables it explains; the
rest of the op and of the sequence is still compared) or a behaviour (`cascades`: once it shows,
what follows in the sequence is a consequence and is not compared). Each has a status:
"kept" (on purpose, listed in the README's "Coming from Reverb") or "open" (not fixed yet; the
entry goes when the fix lands and the differential run shows the sequences agree).
"""
from __future__ import annotations

import dataclasses
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


def _non_negative_refs(op) -> bool:
    """Whether an item op indexes a history with a non-negative index, slice bound or list entry."""
    for _column, index in op.get("trajectory", {}).values():
        if isinstance(index, int) and index >= 0:
            return True
        if isinstance(index, list) and any(i >= 0 for i in index):
            return True
        if isinstance(index, dict) and any(index.get(b) is not None and index[b] >= 0 for b in ("start", "stop")):
            return True
    return False


def _partial_before(sequence, difference) -> bool:
    return any(op.get("partial") for op in sequence["ops"][:difference["index"] + 1])


def _history_from_episode_start(sequence, difference) -> bool:
    op = difference["op"]
    if op["op"] in ("append", "end_episode") and not _partial_before(sequence, difference):
        return all(p.startswith(".ok.history") for p in difference["paths"])
    if op["op"] == "item" and _non_negative_refs(op):
        return True
    # An item Reverb built from a non-negative bound past the history's end cannot be sampled
    # ("Cannot slice (0, 2) out of tensor with shape [1]").
    earlier = [o for o in sequence["ops"][:difference["index"]] if o["op"] == "item"]
    return (op["op"] == "drain" and "Cannot slice" in (difference["reverb"] or {}).get("message", "")
            and any(_non_negative_refs(o) for o in earlier))


def _partial_step_history(sequence, difference) -> bool:
    op = difference["op"]
    if not _partial_before(sequence, difference):
        return False
    return op["op"] in ("append", "end_episode", "item")


def _history_before_append(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (reverb.get("error") == "RuntimeError" and "before `append`" in reverb.get("message", "")
            and "error" in ours)


def _legacy_writer_dtype(sequence, difference) -> bool:
    cast_before = any(op["op"] == "w_append" and "cast" in op for op in sequence["ops"][:difference["index"] + 1])
    return difference["op"]["op"] == "w_append" and cast_before and "error" in (difference["ours"] or {})


def _missing_step_error(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "item" and reverb.get("error") == "ValueError"
            and "None data references" in reverb.get("message", "") and ours.get("error") == "IndexError")


def _zero_priority_drawn(sequence, difference) -> bool:
    sampler = sequence["tables"][0].get("sampler", [""])
    return (difference["op"]["op"] == "distribution" and sampler == ["Prioritized", 0.0]
            and all("of probability 0" in p or "reject" in p for p in difference["paths"]))


def _late_column_mixed_up(sequence, difference) -> bool:
    ours, reverb = difference["ours"] or {}, difference["reverb"] or {}
    appends = [op for op in sequence["ops"][:difference["index"]] if op["op"] == "append"]
    columns = set().union(*(op["step"] for op in appends)) if appends else set()
    late = bool(appends) and any(set(op["step"]) != columns for op in appends)
    return (difference["op"]["op"] == "append" and "ok" in reverb and late
            and "provided for column" in ours.get("message", ""))


def _close_waited(_sequence, difference) -> bool:
    return difference["op"]["op"] == "tw_close" and difference["paths"] == [".ok.waited"]


def _structured_config_accepted(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return difference["op"]["op"] == "sw_open" and reverb.get("error") == "ValueError" and "ok" in ours


def _structured_field_twice(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "sw_append" and "already been set" in ours.get("message", "")
            and ("provided by multiple" in reverb.get("message", "")
                 or "present in previous AppendPartial" in reverb.get("message", "") or "ok" in reverb))


def _stop_only_slice_into_expired_steps(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "item" and reverb.get("error") == "TypeError"
            and "'NoneType' object is not iterable" in reverb.get("message", "")
            and "None data references" in ours.get("message", ""))


def _structured_partial_items(sequence, difference) -> bool:
    partial_before = any(op["op"] == "sw_append" and op.get("partial")
                         for op in sequence["ops"][:difference["index"]])
    return difference["op"]["op"] == "drain" and partial_before and sequence.get("family") == "structured_writer"


def _modulo_comparison_refused(sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "sw_open" and "ok" in reverb
            and "modulo condition can only be compared" in ours.get("message", ""))


def _slice_stop_zero(sequence, difference) -> bool:
    if difference["op"]["op"] != "drain" or sequence.get("family") != "structured_writer":
        return False
    return any(isinstance(index, dict) and index.get("stop") == 0
               for config in sequence["ops"][0].get("configs", []) for _c, index in config["pattern"].values())


def _slice_clipped(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "item" and "None data references" in reverb.get("message", "")
            and "ok" in ours)


def _legacy_item_past_buffer(_sequence, difference) -> bool:
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    return (difference["op"]["op"] == "w_item" and "ok" in reverb
            and "larger than number of buffered timesteps" in ours.get("message", ""))


def _free_insert_refused(_sequence, difference) -> bool:
    op = difference["op"]
    reverb, ours = difference["reverb"] or {}, difference["ours"] or {}
    if op["op"] == "insert":
        return reverb.get("ok", "blocks") is None and ours.get("ok") == "blocks"
    if op["op"] == "can":
        return difference["paths"] == [".ok.insert"] and reverb["ok"]["insert"] and not ours["ok"]["insert"]
    return False


DIVERGENCES: List[Divergence] = [
    Divergence(
        name="prioritized_zero_priority_with_exponent_zero",
        status="open",
        reason="Prioritized(priority_exponent=0.0) samples an item of priority 0 in replay (0 ** 0 == 1); "
               "Reverb never does while another item has a positive priority (prioritized.cc: a zero priority "
               "weighs zero whatever the exponent; all zero samples uniformly).",
        matches=_zero_priority_drawn),
    Divergence(
        name="min_size_free_inserts",
        status="open",
        reason="Reverb lets inserts through without looking at the samples-per-insert diff while "
               "inserts + num_inserts - deletes <= min_size_to_sample (rate_limiter.cc CanInsert); replay "
               "only while size + num_inserts < min_size_to_sample, so a SampleToInsertRatio with a small "
               "max_diff refuses the insert that reaches min_size_to_sample.",
        matches=_free_insert_refused, cascades=True),
    Divergence(
        name="history_from_episode_start",
        status="open",
        reason="Reverb's history counts from the start of the episode: len(history[col]) is the episode's steps "
               "and a non-negative index, slice bound or list entry i means step i of the episode "
               "(_ColumnHistory._slice), only the last num_keep_alive_refs being usable; replay counts within "
               "the kept-alive steps (issue 55, being fixed). Reverb's own arithmetic also has two quirks a "
               "fix must not copy blindly: history[col][len] is the oldest kept step (len - len = 0), "
               "and a slice stop equal to len becomes 0, an empty column, on which create_item crashes.",
        matches=_history_from_episode_start, cascades=True),
    Divergence(
        name="partial_step_in_history",
        status="open",
        reason="After append(..., partial_step=True) Reverb's history already holds the open step (its length "
               "counts it, history[col][-1] is the partial cell, a column first seen in it appears); replay's "
               "history shows completed steps only, so indices after a partial step differ.",
        matches=_partial_step_history, cascades=True),
    Divergence(
        name="late_column_mixed_up",
        status="open",
        reason="A TrajectoryWriter whose first step lacked a column that sorts before the ones it had: "
               "append({'b': int64}), append({'a': float64, 'b': int64}), append({'a': float64, 'b': int64}) -> "
               "replay refuses the third append ('Tensor of wrong dtype provided for column b. Got double but "
               "expected int64'): the columns are mixed up once the new one is placed; Reverb takes it.",
        matches=_late_column_mixed_up, cascades=True),
    Divergence(
        name="close_waits_for_held_items",
        status="open",
        reason="TrajectoryWriter.close() with items a rate limiter holds back (Table.stack('t0', 2), four "
               "items, flush(timeout_ms=200) -> DeadlineExceededError, close()): replay's close waits about "
               "5 s before giving up on them; Reverb's returns at once (its stream is cancelled, the items "
               "dropped).",
        matches=_close_waited),
    Divergence(
        name="structured_config_unchecked",
        status="open",
        reason="client.structured_writer refuses an invalid pattern in Reverb (ValueError: 'Invalid configuration "
               "at position 0: `stop` (-1) must be > `start` (-1)' for step['a'][-1:-1]); replay accepts it.",
        matches=_structured_config_accepted, cascades=True),
    Divergence(
        name="structured_field_set_twice",
        status="kept",
        reason="StructuredWriter.append giving a field the open (partial) step already has: replay raises "
               "ValueError ('Field ... has already been set in the active step', as Reverb's TrajectoryWriter); "
               "Reverb's StructuredWriter raises RuntimeError ('... should never happen, please contact the "
               "Reverb team') or, when the step's other fields are still missing, takes it.",
        matches=_structured_field_twice, cascades=True),
    Divergence(
        name="structured_items_from_partial_step",
        status="open",
        reason="A StructuredWriter whose pattern needs only fields an open partial step already has "
               "(pattern step['a'][-1:], append({'a': 1}, partial_step=True), flush()): Reverb creates the "
               "item from the partial step; replay waits for the step to be complete.",
        matches=_structured_partial_items, cascades=True),
    Divergence(
        name="modulo_condition_comparisons",
        status="open",
        reason="Reverb takes a modulo condition compared with <, <=, > or >= (Condition.data(step)['a'] % 3 >= 200) "
               "when the config is built; replay refuses it (ValueError: 'a modulo condition can only be "
               "compared with == or !='). Keeping the refusal needs a decision and a README line.",
        matches=_modulo_comparison_refused, cascades=True),
    Divergence(
        name="structured_slice_stop_zero",
        status="open",
        reason="A structured pattern slice with stop 0 (step['a'][-1:0]): Reverb reads stop 0 as the end of the "
               "history and creates items of the last step; replay creates none.",
        matches=_slice_stop_zero, cascades=True),
    Divergence(
        name="slice_before_episode_start_clipped",
        status="open",
        reason="An item from a slice reaching before the episode's first step (num_keep_alive_refs=1, one "
               "append, create_item(history['b'][-2:])): Reverb refuses it (ValueError: 'TrajectoryColumns "
               "cannot contain any None data references'); replay creates an item of the one step there is.",
        matches=_slice_clipped, cascades=True),
    Divergence(
        name="legacy_item_past_buffer",
        status="open",
        reason="Legacy Writer(max_sequence_length=4): two appends, create_item(num_timesteps=2), flush(), "
               "create_item(num_timesteps=4): Reverb takes the call; replay raises InvalidArgumentError "
               "('num_timesteps is larger than number of buffered timesteps').",
        matches=_legacy_item_past_buffer, cascades=True),
    Divergence(
        name="history_before_first_append",
        status="open",
        reason="Reading TrajectoryWriter.history (or building an item from it, or end_episode, which reads it) "
               "before the first append raises RuntimeError in Reverb, InvalidArgumentError (a ValueError) "
               "in replay.",
        matches=_history_before_append),
    Divergence(
        name="missing_step_error_type",
        status="open",
        reason="An item referencing a step the history no longer (or never) held: Reverb raises ValueError "
               "('TrajectoryColumns cannot contain any None data references'), replay IndexError (not a "
               "ValueError); both create nothing.",
        matches=_missing_step_error),
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
