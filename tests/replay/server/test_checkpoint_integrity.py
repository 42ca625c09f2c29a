"""Checkpoint integrity: every file is checksummed and verified on load, every malformed manifest
field is a named error, a corrupt newest checkpoint falls back to the previous one, and the log
says when checkpoints are skipped or declared table settings replace a checkpoint's."""
import hashlib
import json
import logging
import os

import numpy as np
import pytest

from replay import errors, rate_limiters, selectors
from replay.checkpoint import Checkpointer
from replay.server import Server
from replay.table import Table
from tests.replay.server.conftest import fill_with_priorities, make_tables

pytestmark = pytest.mark.timeout(180)


def _contents(server, table="prioritized"):
    """key -> (priority, times_sampled, value) of every item, read through a client."""
    client = server.localhost_client()
    keys = set(server.tables[table].keys())
    out = {}
    for sample in client.sample(table, 400, timeout=10, emit_timesteps=False, unpack_as_table_signature=True):
        out[sample.info.key] = (sample.info.priority, float(np.asarray(sample.data[0]).ravel()[0]))
        if len(out) == len(keys):
            break
    return out


def _two_checkpoints(tmp_path):
    """(checkpointer, older path, newer path, contents at the older one) of a server whose
    tables changed between the two checkpoints."""
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(make_tables(), checkpointer=checkpointer) as server:
        client = server.localhost_client()
        fill_with_priorities(client, "prioritized", range(1, 6))
        older = client.checkpoint()
        contents = _contents(server)
        fill_with_priorities(client, "prioritized", range(6, 9))
        client.mutate_priorities("prioritized", updates={server.tables["prioritized"].keys()[0]: 77.0})
        newer = client.checkpoint()
    return checkpointer, older, newer, contents


def _flip_bit(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset % len(data)] ^= 0x04
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("file,offset", [("items.bin", -9), ("items.bin", 40), ("chunks.bin", -3),
                                         ("chunks.bin", 30), ("manifest.json", 60), ("DONE", 5)])
def test_a_flipped_bit_in_the_newest_checkpoint_falls_back_to_the_previous(tmp_path, caplog, file, offset):
    checkpointer, older, newer, contents = _two_checkpoints(tmp_path)
    _flip_bit(os.path.join(newer, file), offset)
    with pytest.raises(errors.CorruptCheckpointError, match=file.replace(".", r"\.")):
        Checkpointer.load(newer)
    caplog.set_level(logging.WARNING)
    with Server(make_tables(), checkpointer=checkpointer) as restored:
        assert _contents(restored) == contents  # exactly the older checkpoint's items
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert newer in warnings and "cannot be loaded" in warnings
    assert f"older checkpoint {older}" in warnings


def test_a_server_with_only_corrupt_checkpoints_refuses_to_start_and_names_them(tmp_path):
    checkpointer, older, newer, _ = _two_checkpoints(tmp_path)
    _flip_bit(os.path.join(newer, "items.bin"), -9)
    _flip_bit(os.path.join(older, "chunks.bin"), -3)
    with pytest.raises(errors.CorruptCheckpointError) as caught:
        Server(make_tables(), checkpointer=checkpointer)
    message = str(caught.value)
    assert os.path.basename(newer) in message and "items.bin" in message
    assert os.path.basename(older) in message and "chunks.bin" in message
    assert "move it aside" in message


def _rewrite_manifest(checkpoint, mutate):
    """Changes manifest.json in place (or replaces it with what `mutate` returns when that is a
    list) and gives DONE the matching checksum, so only the field is wrong."""
    path = os.path.join(checkpoint, "manifest.json")
    manifest = json.load(open(path))
    replaced = mutate(manifest)
    if isinstance(replaced, list):
        manifest = replaced
    data = json.dumps(manifest).encode()
    open(path, "wb").write(data)
    open(os.path.join(checkpoint, "DONE"), "w").write(f"{hashlib.sha256(data).hexdigest()}  manifest.json\n")


def _table_entry(manifest, name="prioritized"):
    return next(t for t in manifest["tables"] if t["config"]["name"] == name)


MALFORMED_MANIFESTS = {
    "missing num_items": (lambda m: _table_entry(m).pop("num_items"), r"tables\[1\]\.num_items is missing"),
    "non-numeric counter": (lambda m: _table_entry(m)["counters"].update(num_inserts="many"),
                            r"tables\[1\]\.counters\.num_inserts must be an integer"),
    "tables as a string": (lambda m: m.update(tables="prioritized"), "field tables must be a list"),
    "table entry not an object": (lambda m: m["tables"].__setitem__(0, 7), r"tables\[0\] must be an object"),
    "missing config": (lambda m: _table_entry(m).pop("config"), r"tables\[1\]\.config is missing"),
    "table name not a string": (lambda m: _table_entry(m)["config"].update(name=5),
                                r"tables\[1\]\.config\.name must be a string"),
    "repeated table": (lambda m: m["tables"].append(m["tables"][1]), "repeats table name 'prioritized'"),
    "negative num_chunks": (lambda m: m.update(num_chunks=-1), "num_chunks must be an integer >= 0"),
    "wrong num_chunks": (lambda m: m.update(num_chunks=m["num_chunks"] + 1), "field num_chunks"),
    "wrong num_items": (lambda m: _table_entry(m).update(num_items=3), r"tables\[1\]\.num_items"),
    "missing files": (lambda m: m.pop("files"), "field files is missing"),
    "bad file checksum field": (lambda m: m["files"]["items.bin"].update(sha256="xyz"),
                                r"files\.items\.bin\.sha256 must be 64"),
    "counters as a list": (lambda m: _table_entry(m).update(counters=[1]),
                           r"tables\[1\]\.counters must be an object"),
    "top level a list": (lambda m: [m], r"field \(top level\) must be an object"),
    "bad sampler in config": (lambda m: _table_entry(m)["config"].update(sampler={"kind": "Nope"}),
                              r"tables\[1\] \(table 'prioritized'\) cannot be restored.*sampler"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_MANIFESTS))
def test_malformed_manifest_field_is_a_named_error(tmp_path, case):
    checkpointer, older, newer, _ = _two_checkpoints(tmp_path)
    mutate, pattern = MALFORMED_MANIFESTS[case]
    _rewrite_manifest(newer, mutate)
    with pytest.raises(errors.CorruptCheckpointError, match=pattern) as caught:
        Checkpointer.load(newer)
    assert f"checkpoint {newer}" in str(caught.value) and "manifest.json" in str(caught.value)
    import shutil

    shutil.rmtree(older)  # no previous checkpoint to fall back to: the restart names the field
    with pytest.raises(errors.CorruptCheckpointError, match=pattern):
        Server(make_tables(), checkpointer=checkpointer)


def test_another_format_version_is_refused_with_the_version(tmp_path):
    checkpointer, _, newer, _ = _two_checkpoints(tmp_path)
    _rewrite_manifest(newer, lambda m: m.update(version=99))
    with pytest.raises(errors.InvalidArgumentError, match="version 99"):
        Checkpointer.load(newer)


def test_only_incomplete_checkpoints_start_empty_and_say_so(tmp_path, caplog):
    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(make_tables(), checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "uniform", [1, 2])
        path = server.checkpoint()
    os.remove(os.path.join(path, "DONE"))  # as if the process died before the marker
    caplog.set_level(logging.WARNING)
    with Server(make_tables(), checkpointer=checkpointer) as restored:
        assert restored.tables["uniform"].size == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(path in w and "incomplete" in w for w in warnings), warnings


def test_declared_settings_that_differ_from_the_checkpoint_win_and_are_logged(tmp_path, caplog):
    def tables(max_size, exponent):
        return [Table("prioritized", selectors.Prioritized(exponent, seed=2), selectors.Fifo(), max_size,
                      rate_limiters.MinSize(1))]

    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(tables(1000, 1.0), checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "prioritized", [1, 2, 3])
        server.checkpoint()
    caplog.set_level(logging.WARNING)
    with Server(tables(1000, 1.0), checkpointer=checkpointer):
        pass
    assert not [r for r in caplog.records if "declared settings" in r.getMessage()]
    with Server(tables(50, 0.5), checkpointer=checkpointer) as restored:
        assert restored.tables["prioritized"].max_size == 50  # the declared config wins
        assert restored.tables["prioritized"].info().sampler_options["priority_exponent"] == 0.5
        assert restored.tables["prioritized"].size == 3
    (message,) = [r.getMessage() for r in caplog.records if "declared settings" in r.getMessage()]
    assert "'prioritized'" in message and "max_size 1000 -> 50" in message and "sampler" in message
    assert "rate_limiter" not in message


def test_a_checkpoint_of_the_unverified_format_version_1_loads_with_a_warning(tmp_path, caplog):
    """Checkpoints written before checksums existed stay loadable (with a warning)."""
    checkpointer, _, newer, _ = _two_checkpoints(tmp_path)
    with Server(make_tables(), checkpointer=checkpointer) as server:
        expected = _contents(server)

    def as_version_1(manifest):
        manifest.pop("files")
        manifest["version"] = 1

    _rewrite_manifest(newer, as_version_1)
    open(os.path.join(newer, "DONE"), "w").close()  # version 1 wrote an empty marker
    caplog.set_level(logging.WARNING)
    with Server(make_tables(), checkpointer=checkpointer) as restored:
        assert _contents(restored) == expected
    assert any("unverified" in r.getMessage() and newer in r.getMessage() for r in caplog.records)


def test_checkpoint_files_carry_checksums_that_sha256sum_can_check(tmp_path):
    checkpointer, _, newer, _ = _two_checkpoints(tmp_path)
    manifest = json.load(open(os.path.join(newer, "manifest.json")))
    for name in ("chunks.bin", "items.bin"):
        data = open(os.path.join(newer, name), "rb").read()
        assert manifest["files"][name] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    done = open(os.path.join(newer, "DONE")).read()
    manifest_digest = hashlib.sha256(open(os.path.join(newer, "manifest.json"), "rb").read()).hexdigest()
    assert done == f"{manifest_digest}  manifest.json\n"


def test_replay_server_command_names_the_bad_manifest_field_instead_of_a_traceback(tmp_path, tables_yaml):
    import subprocess
    import sys

    from tests.replay.server.conftest import REPO_ROOT

    checkpointer = Checkpointer(str(tmp_path / "ckpt"))
    with Server(make_tables(), checkpointer=checkpointer) as server:
        fill_with_priorities(server.localhost_client(), "uniform", [1, 2])
        path = server.checkpoint()
    _rewrite_manifest(path, lambda m: m.update(tables="uniform"))
    result = subprocess.run([sys.executable, "-m", "replay.server_main", "--config", str(tables_yaml),
                             "--checkpoint-dir", checkpointer.path],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert result.returncode == 2, result.stderr
    assert "manifest.json: field tables must be a list" in result.stderr
    assert "Traceback" not in result.stderr
