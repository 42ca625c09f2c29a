"""The differential tool's comparison: one sequence's observations from Reverb against ours.

Exact where Reverb is deterministic. Where it is not (a Uniform or Prioritized sampler or
remover), the values an item's identity decides (which item came, its priority, probability,
times sampled, `num_unique_samples`, which ids a mutation found) are masked and the rest is
compared (what blocked, table sizes, dtypes and shapes); `distribution` ops are checked on each
side against the distribution Reverb's selectors define (prioritized.cc: weight priority^exponent,
a zero priority weighs zero even with exponent 0, all weights zero samples uniformly).
Errors match when Reverb's exception class is among the classes ours is an instance of, also
where an observation holds one inside (what reading a writer's history raised after an append).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

NONDETERMINISTIC = ("Uniform", "Prioritized")
MASK = "<masked>"
# A side's draw counts may reject the expected distribution at this p-value only by chance
# about once in a million sequences.
CHI_SQUARE_P = 1e-6


def _is_nondeterministic(sequence: Dict[str, Any], table: Optional[str]) -> bool:
    for config in sequence["tables"]:
        if table is not None and config["name"] != table:
            continue
        kinds = [config.get("sampler", ["Fifo"])[0], config.get("remover", ["Fifo"])[0]]
        if any(k in NONDETERMINISTIC for k in kinds):
            return True
    return False


def _mask_sample(result):
    if not isinstance(result, dict):
        return result
    masked = dict(result, priority=MASK, probability=MASK, times_sampled=MASK)
    masked["data"] = _mask_values(result["data"])
    return masked


def _mask_values(data):
    if isinstance(data, list) and len(data) == 3 and isinstance(data[0], str):
        return [data[0], data[1], MASK]
    if isinstance(data, list):
        return [_mask_values(d) for d in data]
    return data


def _masked(sequence, op, observation):
    """The observation with what Reverb leaves to chance masked."""
    if "ok" not in observation:
        return observation
    value = observation["ok"]
    name = op["op"]
    if name in ("sample", "drain") and _is_nondeterministic(sequence, op["table"]):
        return {"ok": [_mask_sample(r) for r in value]}
    if name == "mutate" and _is_nondeterministic(sequence, op["table"]):
        return {"ok": {"known": MASK}}
    if name == "info":
        masked = {}
        for table, fields in value.items():
            fields = dict(fields)
            if _is_nondeterministic(sequence, table):
                fields["num_unique_samples"] = MASK
            masked[table] = fields
        return {"ok": masked}
    return observation


def _is_error(value) -> bool:
    return isinstance(value, dict) and "error" in value and "isa" in value


def _same(a, b) -> bool:
    if _is_error(a) and _is_error(b):
        return _errors_match(a, b)
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if math.isinf(a) or math.isinf(b):
                return a == b
            return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7)
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _differences(a, b, path="") -> List[str]:
    """Paths where two observables differ (the first few)."""
    if _same(a, b):
        return []
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        found = []
        for key in sorted(a):
            found += _differences(a[key], b[key], f"{path}.{key}")
        return found[:5]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        found = []
        for index, (x, y) in enumerate(zip(a, b)):
            found += _differences(x, y, f"{path}[{index}]")
        return found[:5]
    return [path or "."]


def _errors_match(reverb: Dict[str, Any], ours: Dict[str, Any]) -> bool:
    return reverb["error"] in ours.get("isa", [ours["error"]])


def expected_distribution(sampler, priorities: Dict[int, float]) -> Dict[int, float]:
    """Reverb's sampling probability of each item id (prioritized.cc, uniform.cc)."""
    if sampler[0] == "Uniform" or not priorities:
        return {k: 1.0 / len(priorities) for k in priorities}
    exponent = sampler[1]
    weights = {k: (0.0 if p == 0 else p ** exponent) for k, p in priorities.items()}
    total = sum(weights.values())
    if total == 0:
        return {k: 1.0 / len(weights) for k in weights}
    return {k: w / total for k, w in weights.items()}


def _chi_square_p(counts: Dict[int, int], expected: Dict[int, float]) -> float:
    from scipy import stats
    n = sum(counts.values())
    support = [k for k, p in expected.items() if p > 0]
    if len(support) < 2:
        return 1.0
    observed = [counts.get(k, 0) for k in support]
    n = sum(observed)
    return float(stats.chisquare(observed, [expected[k] * n for k in support]).pvalue)


def check_distributions(sequence, observations) -> List[str]:
    """Where one side's draws contradict the distribution Reverb's selectors define."""
    problems = []
    priorities = {i + 1: p for i, p in enumerate(sequence["priorities"])}
    sampler = sequence["tables"][0]["sampler"]
    for index, (op, observation) in enumerate(zip(sequence["ops"], observations)):
        if op["op"] == "mutate" and "ok" in observation:
            for item in observation["ok"]["known"]:
                if str(item) in op["updates"]:
                    priorities[item] = op["updates"][str(item)]
        if op["op"] != "distribution":
            continue
        if "ok" not in observation:
            problems.append(f"op {index}: {observation.get('error')}")
            continue
        expected = expected_distribution(sampler, priorities)
        counts = {int(k): v for k, v in observation["ok"]["counts"].items()}
        impossible = [k for k in counts if expected.get(k, 0.0) == 0.0]
        if impossible:
            problems.append(f"op {index}: drew items {impossible} of probability 0")
        for item, given in observation["ok"]["probabilities"].items():
            want = expected.get(int(item), 0.0)
            if any(not math.isclose(g, want, rel_tol=1e-4, abs_tol=1e-6) for g in given):
                problems.append(f"op {index}: item {item} reported probability {given}, expected {want:.6f}")
        p_value = _chi_square_p(counts, expected)
        if p_value < CHI_SQUARE_P:
            problems.append(f"op {index}: counts {counts} reject {expected} (p={p_value:.2g})")
    return problems


def compare_sequence(sequence, reverb_observations, our_observations) -> List[Dict[str, Any]]:
    """Every op where our observation differs from Reverb's: dicts with the op's index, the op,
    both observations, the differing paths and `history` (the op's writer's history lengths
    Reverb reported last). A crashed run or a missing observation is a
    difference at its op."""
    differences = []
    if sequence.get("family") == "distribution":
        for side, observations in (("reverb", reverb_observations), ("ours", our_observations)):
            for problem in check_distributions(sequence, observations):
                differences.append({"index": -1, "op": {"op": "distribution"}, "paths": [f"{side}: {problem}"],
                                    "reverb": None, "ours": None, "side": side})
    if reverb_observations and "tables" in reverb_observations[0] or our_observations and "tables" in \
            our_observations[0]:
        reverb_first, ours_first = reverb_observations[0], our_observations[0]
        if "tables" in reverb_first and "tables" in ours_first and _errors_match(reverb_first["tables"],
                                                                                 ours_first["tables"]):
            return differences
        differences.append({"index": 0, "op": {"op": "tables"}, "paths": ["tables"], "reverb": reverb_first,
                            "ours": ours_first})
        return differences
    # Per writer, the history lengths Reverb reported last (after an append or end_episode):
    # a divergence may depend on them (divergences.py), so each difference carries them.
    histories: Dict[Any, Dict[str, int]] = {}
    # Per writer, the appends Reverb refused so far (a refused append may still have effects
    # there, which divergences.py matches).
    refused: Dict[Any, List[Dict[str, Any]]] = {}
    for index, op in enumerate(sequence["ops"]):
        reverb = reverb_observations[index] if index < len(reverb_observations) else {"missing": True}
        ours = our_observations[index] if index < len(our_observations) else {"missing": True}
        differences_before = len(differences)
        _compare_op(sequence, index, op, reverb, ours, differences)
        for difference in differences[differences_before:]:
            difference["history"] = dict(histories.get(op.get("w", 0), {}))
            difference["refused_appends"] = list(refused.get(op.get("w", 0), []))
        writer = op.get("w", 0)
        if op["op"] == "append" and "error" in reverb:
            refused.setdefault(writer, []).append(op)
        if op["op"] == "tw_open":
            histories[writer] = {}
            refused[writer] = []
        elif op["op"] in ("append", "end_episode") and isinstance(reverb.get("ok"), dict):
            lengths = reverb["ok"].get("history")
            if isinstance(lengths, dict) and not _is_error(lengths):
                histories[writer] = lengths
    return differences


def _compare_op(sequence, index, op, reverb, ours, differences) -> None:
    """Appends the difference of one op's observations, if any."""
    if op["op"] == "distribution":
        if ("ok" in reverb) != ("ok" in ours):
            differences.append({"index": index, "op": op, "paths": ["."], "reverb": reverb, "ours": ours})
        return
    if "ok" in reverb and isinstance(reverb["ok"], dict) and "not_called" in reverb["ok"]:
        # Reverb crashes on this call (executor.py says why): any named error of ours will do.
        if "error" not in ours:
            differences.append({"index": index, "op": op, "paths": ["not_called"], "reverb": reverb, "ours": ours})
        return
    if "error" in reverb and "error" in ours:
        if not _errors_match(reverb, ours):
            differences.append({"index": index, "op": op, "paths": ["error"], "reverb": reverb, "ours": ours})
        return
    reverb, ours = _masked(sequence, op, reverb), _masked(sequence, op, ours)
    paths = _differences(reverb, ours)
    if paths:
        differences.append({"index": index, "op": op, "paths": paths, "reverb": reverb, "ours": ours})
