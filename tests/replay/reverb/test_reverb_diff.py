"""replay.reverb against Reverb 0.14's recorded behaviour: the seeded subset of the differential
tool's sequences (tools/reverb_diff/, recorded with `run.py --record`) run on this side only,
every observable compared with what Reverb did, the known divergences (divergences.py) skipped
exactly where they show.

The recordings are tests/replay/reverb_diff/<family>.json. Regenerate them, with a Python that
has dm-reverb 0.14 (150 sequences a family; 40 of distribution and blocking, whose sequences
sample hundreds of times or wait on timeouts; 12 of datasets, each building two tf.data pipelines):
    python tools/reverb_diff/run.py --reverb-python PATH --family FAMILY --sequences 150 --seed 55 \\
        --record tests/replay/reverb_diff
"""
import json
import os
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_RECORDINGS = os.path.join(_ROOT, "tests", "replay", "reverb_diff")
sys.path.insert(0, _ROOT)

from tools.reverb_diff import compare, divergences, executor  # noqa: E402

FAMILIES = sorted(name[:-5] for name in os.listdir(_RECORDINGS) if name.endswith(".json"))

# Recorded sequences this test leaves out, each a repeat of a case the run keeps: in blocking,
# 21-25 close a writer whose items a queue table of size 1 holds back (replay's close then waits
# about 5 s, the kept divergence close_waits_for_held_items); 20 keeps that case with the most
# flushes and samples (21 and 22 are the same ops, 23-25 shorter runs of them) and 8 keeps it for
# a Stack limiter. 39 is that case for a Fifo/Fifo table of Queue(2) limiter sampled once, which
# is what a queue table is (Table.queue), as in 20. tools/reverb_diff/run.py runs every sequence.
LEFT_OUT = {"blocking": {21, 22, 23, 24, 25, 39}}

# Sequences sharing one server (each under its own table names). The recording ran 200 to a
# server; every observable but server_info and checkpoint is per table, and those two are
# compared on the sequence's own tables only, so a smaller batch observes the same. It makes the
# run cheaper: server_info and checkpoint answer for every table of the batch.
BATCH_SIZE = 25


def _describe(sequence, difference):
    ops = sequence["ops"][:difference["index"] + 1]
    return (f"sequence {sequence['index']} of {sequence['family']}: tables {json.dumps(sequence['tables'])}, "
            f"columns {json.dumps(sequence.get('columns'))}, ops {json.dumps(ops)}; differs at "
            f"{difference['paths']}: reverb {json.dumps(difference['reverb'])[:400]}, "
            f"ours {json.dumps(difference['ours'])[:400]}")


def test_every_family_is_recorded():
    assert set(FAMILIES) >= {"selectors", "rate_limiters", "distribution", "blocking", "trajectory_writer", "writer",
                            "structured_writer", "client", "datasets"}


@pytest.mark.parametrize("family", FAMILIES)
def test_replay_reverb_behaves_as_recorded_from_reverb(family):
    with open(os.path.join(_RECORDINGS, f"{family}.json")) as f:
        recording = json.load(f)
    assert len(recording["sequences"]) == len(recording["reverb"])
    left_out = LEFT_OUT.get(family, set())
    assert left_out <= {sequence["index"] for sequence in recording["sequences"]}
    kept = [(sequence, theirs) for sequence, theirs in zip(recording["sequences"], recording["reverb"])
            if sequence["index"] not in left_out]
    sequences = [sequence for sequence, _ in kept]
    ours = executor.run_sequences("replay.reverb", sequences, batch_size=BATCH_SIZE)
    assert len(ours) == len(sequences)
    unexplained = []
    for (sequence, theirs), mine in zip(kept, ours):
        found = divergences.classify(sequence, compare.compare_sequence(sequence, theirs, mine))
        unexplained += [_describe(sequence, d) for d in found["unknown"]]
    assert not unexplained, f"{len(unexplained)} sequences diverge from Reverb:\n" + "\n".join(unexplained[:5])


def test_an_unlisted_difference_fails_the_comparison():
    """The comparison is not vacuous: a changed observable is a difference no divergence explains."""
    with open(os.path.join(_RECORDINGS, "selectors.json")) as f:
        recording = json.load(f)
    sequence, theirs = next((s, r) for s, r in zip(recording["sequences"], recording["reverb"])
                            if any(op["op"] == "info" for op in s["ops"]) and not compare.NONDETERMINISTIC
                            .__contains__(s["tables"][0]["sampler"][0]))
    mine = json.loads(json.dumps(theirs))
    index = max(i for i, op in enumerate(sequence["ops"]) if op["op"] == "info")
    mine[index]["ok"]["t0"]["current_size"] += 1
    found = divergences.classify(sequence, compare.compare_sequence(sequence, theirs, mine))
    assert found["unknown"] and found["unknown"][0]["paths"] == [".ok.t0.current_size"]
