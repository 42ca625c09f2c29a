"""TrajectoryWriter.append_step_items (the rollout workers' path: n steps, one item per step, with
the work done per chunk) against the per-step `append` + `create_item` loop it replaces, on a real
server; and the table's cached check of step items against its signature."""
import numpy as np
import pytest

from replay import errors
from replay.chunks import Chunk
from replay.items import Item


def _steps(n, start=0):
    t = np.arange(start, start + n)
    return {"obs": np.stack([np.full(3, s, np.float32) for s in t]), "action": t.astype(np.int64)}


def _drain(client, table, n):
    rows = []
    for sample in client.sample(table, n, emit_timesteps=False, unpack_as_table_signature=True):
        data = sample.data
        if isinstance(data, list):  # a table without a signature: leaves in sorted key order
            data = dict(zip(["action", "obs"], data))
        rows.append((int(data["action"]), data["obs"].tolist(), sample.info.priority))
    return sorted(rows)


def test_step_items_hold_what_the_per_step_loop_writes(client):
    steps = _steps(10)
    priorities = np.arange(10) + 0.5
    with client.trajectory_writer(num_keep_alive_refs=1, chunk_length=4) as writer:
        writer.append_step_items("queue", steps, priorities)
        writer.flush()
    batched = _drain(client, "queue", 10)
    with client.trajectory_writer(num_keep_alive_refs=1, chunk_length=4) as writer:
        for t in range(10):
            refs = writer.append({k: v[t] for k, v in steps.items()})
            writer.create_item("queue", float(priorities[t]), refs)
        writer.flush()
    assert batched == _drain(client, "queue", 10)
    assert [row[0] for row in batched] == list(range(10))
    assert batched[3] == (3, [3.0, 3.0, 3.0], 3.5)


def test_step_items_fit_a_signature_and_mix_with_single_steps(client):
    with client.trajectory_writer(num_keep_alive_refs=2, chunk_length=3) as writer:
        refs = writer.append({k: v[0] for k, v in _steps(1, start=100).items()})
        writer.append_step_items("typed", _steps(5))  # closes the open chunk first
        history = writer.history["action"]
        assert [history[-2].numpy().item(), history[-1].numpy().item()] == [3, 4]
        writer.create_item("typed", 1.0, {"obs": writer.history["obs"][-1],
                                          "action": writer.history["action"][-1]})
        with pytest.raises(errors.InvalidArgumentError, match="expired"):
            writer.create_item("typed", 1.0, refs)  # step 100 left the two-step window
        writer.append({k: v[0] for k, v in _steps(1, start=200).items()})
        writer.create_item("typed", 1.0, {"obs": writer.history["obs"][-1],
                                          "action": writer.history["action"][-1]})
        writer.flush()
    assert client.server_info()["typed"].current_size == 7
    actions = sorted(int(s.data["action"]) for s in client.sample("typed", 200,
                                                                  emit_timesteps=False, unpack_as_table_signature=True))
    assert set(actions) == {0, 1, 2, 3, 4, 200}


@pytest.mark.parametrize("steps, priorities, message", [
    ({"obs": np.zeros((3, 3), np.float32), "action": np.zeros(2, np.int64)}, None,
     "different numbers of steps"),
    (_steps(3), [1.0, -1.0, 2.0], "finite number >= 0"),
    (_steps(3), [1.0, float("nan"), 2.0], "finite number >= 0"),
    (_steps(3), [1.0, 2.0], "2 priorities for 3 steps"),
    ({"obs": np.zeros(3, np.float32), "action": np.zeros(3, np.int64)}, None, "rows of shape"),
    ({"obs": np.zeros((3, 3), np.float64), "action": np.zeros(3, np.int64)}, None, "dtype"),
])
def test_bad_step_items_are_refused_before_anything_is_sent(client, steps, priorities, message):
    with client.trajectory_writer(num_keep_alive_refs=1, chunk_length=2) as writer:
        writer.append_step_items("uniform", _steps(2))  # fixes the specs
        with pytest.raises(errors.InvalidArgumentError, match=message):
            writer.append_step_items("uniform", steps, priorities)
        writer.flush()
    assert client.server_info()["uniform"].current_size == 2


def test_step_items_that_do_not_fit_the_signature_are_refused_and_the_table_keeps_its_items(client):
    with client.trajectory_writer(num_keep_alive_refs=1, chunk_length=4) as writer:
        writer.append_step_items("typed", _steps(4))
        writer.flush()
    wrong = {"obs": np.zeros((4, 2), np.float32), "action": np.zeros(4, np.int64)}
    with pytest.raises(errors.SignatureMismatchError):
        with client.trajectory_writer(num_keep_alive_refs=1, chunk_length=4) as writer:
            writer.append_step_items("typed", wrong)
            writer.flush()
    assert client.server_info()["typed"].current_size == 4


def test_the_table_checks_every_chunk_of_step_items_against_its_signature(server):
    """The fit of a chunk's step items is cached per chunk: a later chunk with other column
    specs is checked again, and a slice outside its chunk is refused whatever was cached."""
    table = server.tables["typed"]
    # columns in the signature's flat order: action, obs
    good = Chunk.from_columns(1, [np.arange(2, dtype=np.int64), np.zeros((2, 3), np.float32)])
    bad = Chunk.from_columns(1, [np.arange(2, dtype=np.int64), np.zeros((2, 3), np.float64)])

    def step_item(key, chunk, offset, length=1):
        return Item(key, 1.0, [(True, ((chunk.key, offset, length, 0),)),
                               (True, ((chunk.key, offset, length, 1),))], {chunk.key: chunk})

    table.insert_many([step_item(10, good, 0), step_item(11, good, 1)])
    with pytest.raises(errors.SignatureMismatchError):
        table.insert_many([step_item(12, bad, 0)])  # the same chunk key, other specs
    with pytest.raises(errors.InvalidArgumentError, match="outside chunk"):
        table.insert_many([step_item(13, good, 2)])
    with pytest.raises(errors.InvalidArgumentError, match="squeezed but spans"):
        table.insert_many([step_item(14, good, 0, length=2)])
    assert table.size == 2
