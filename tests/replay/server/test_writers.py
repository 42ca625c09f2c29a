"""Writer and TrajectoryWriter behaviour: chunking, keep-alive, episodes, argument errors."""
import time

import numpy as np
import pytest

from replay import errors

pytestmark = pytest.mark.timeout(120)


def test_chunk_length_groups_steps_and_items_wait_for_their_chunk(server, client):
    writer = client.trajectory_writer(num_keep_alive_refs=8, chunk_length=4, delta_encoded=True)
    for t in range(6):
        writer.append({"frame": np.full((2, 2), t, np.int32)})
        writer.create_item("uniform", 1.0, {"frame": writer.history["frame"][-1:]})
    # Items 0-3 went out with the first (closed) chunk; items 4-5 wait for the open one.
    writer.flush(block_until_num_items=0, timeout_ms=10_000)
    assert server.tables["uniform"].size == 6
    lengths = sorted(server.chunk_store.get([k])[0].length for k in server.chunk_store.keys())
    assert lengths == [2, 4]  # flush closed the open chunk after 2 steps
    assert any(c.delta_encoded for k in server.chunk_store.keys() for c in server.chunk_store.get([k])[0].columns)
    sampled = client.sample("uniform", 200, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)
    values = sorted(int(s.data[0][0, 0, 0]) for s in sampled)
    assert set(values) == set(range(6))
    writer.close()


def test_keep_alive_window_and_history_errors(client):
    writer = client.trajectory_writer(num_keep_alive_refs=2)
    with pytest.raises(RuntimeError, match="before `append` is called"):
        writer.history
    first = writer.append({"x": np.float32(0)})
    for t in range(1, 4):
        writer.append({"x": np.float32(t)})
    with pytest.raises(errors.InvalidArgumentError, match="Error in column 0: Column contains expired CellRef"):
        writer.create_item("uniform", 1.0, first)
    # An index beyond the kept-alive steps is a None reference, which a column refuses (as Reverb).
    with pytest.raises(ValueError, match="cannot contain any None data references"):
        writer.history["x"][-3]
    with pytest.raises(errors.InvalidArgumentError, match="priority"):
        writer.create_item("uniform", -1.0, writer.history["x"][-1])
    with pytest.raises(errors.InvalidArgumentError, match="shape"):
        writer.append({"x": np.zeros(2, np.float32)})
    writer.create_item("uniform", 1.0, writer.history["x"][-2:])
    writer.flush(timeout_ms=10_000)
    sample = next(client.sample("uniform", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
    np.testing.assert_array_equal(sample.data[0], [2.0, 3.0])
    writer.close()


def test_history_indices_count_from_the_start_of_the_episode(client):
    """As Reverb's `_ColumnHistory`: index i >= 0 is the episode's step i (as if the history
    were unbounded), negative indices count from the end; only kept-alive steps can be used."""
    writer = client.trajectory_writer(num_keep_alive_refs=2)
    for t in range(5):
        writer.append({"x": np.int64(t)})
    column = writer.history["x"]
    assert len(column) == 5
    assert column[3].numpy() == 3 and column[4].numpy() == 4
    assert column[-1].numpy() == 4 and column[-2].numpy() == 3
    np.testing.assert_array_equal(column[3:].numpy(), [3, 4])
    np.testing.assert_array_equal(column[3:5].numpy(), [3, 4])
    np.testing.assert_array_equal(column[[4, 3]].numpy(), [4, 3])
    np.testing.assert_array_equal(column[:4].numpy(), [3])  # kept cells before step 4, as Reverb's
    for expired in (0, 2, -3, -6):
        with pytest.raises(ValueError, match="None data references"):
            column[expired]
    with pytest.raises(ValueError, match="None data references"):
        column[2:]
    with pytest.raises(IndexError):
        column[5]
    writer.create_item("uniform", 1.0, {"x": column[3:5]})
    writer.end_episode(timeout_ms=10_000)
    writer.append({"x": np.int64(10)})
    assert len(writer.history["x"]) == 1 and writer.history["x"][0].numpy() == 10
    writer.close()
    sample = next(client.sample("uniform", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
    np.testing.assert_array_equal(sample.data[0], [3, 4])


def test_steps_may_lack_columns_add_columns_and_be_given_in_parts(client):
    writer = client.trajectory_writer(num_keep_alive_refs=3)
    writer.append({"obs": np.float32(0)})
    writer.append({"obs": np.float32(1), "action": np.int64(7)})  # a new column
    history = writer.history
    assert sorted(history) == ["action", "obs"]
    with pytest.raises(ValueError, match="None data references"):
        history["action"][0]  # the first step had no action
    writer.append({"obs": np.float32(2)}, partial_step=True)
    assert writer.episode_steps == 2  # a partial step counts once complete
    assert writer.history["obs"][-1].numpy() == 2  # its cells can be used at once
    with pytest.raises(ValueError, match="has already been set in the active step"):
        writer.append({"obs": np.float32(3)}, partial_step=True)
    # an item of the open step's first part goes out (closing its chunk) before the rest arrives
    writer.create_item("uniform", 1.0, {"obs": writer.history["obs"][-2:]})
    writer.flush(timeout_ms=10_000)
    writer.append({"action": np.int64(8)})
    assert writer.episode_steps == 3
    writer.create_item("uniform", 1.0, {"obs": writer.history["obs"][-1],
                                        "action": writer.history["action"][-2:]})
    with pytest.raises(ValueError, match="wrong dtype"):
        writer.append({"obs": np.float64(3)})
    writer.close(flush=True)
    sampled = client.sample("uniform", 30, emit_timesteps=False, unpack_as_table_signature=True)
    data = sorted((len(s.data), [np.asarray(c).tolist() for c in s.data]) for s in sampled)
    assert [1, [[1.0, 2.0]]] in [list(d) for d in data]
    assert [2, [[7, 8], 2.0]] in [list(d) for d in data]  # columns in sorted-key order


def test_flush_and_end_episode_time_out_with_reverbs_error(client):
    """The "queue" table holds 100 items: the 101st is not acknowledged until one is sampled."""
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    for t in range(101):
        writer.append(np.float32(t))
        writer.create_item("queue", 1.0, writer.history[-1])
        if t == 99:
            writer.flush(timeout_ms=10_000)
    with pytest.raises(errors.DeadlineExceededError, match="Flush call did not complete within provided timeout"):
        writer.flush(timeout_ms=100)
    with pytest.raises(errors.DeadlineExceededError, match="End episode call did not complete"):
        writer.end_episode(timeout_ms=100)
    assert writer.episode_steps == 101  # the episode did not end
    with pytest.raises(ValueError, match="block_until_num_items"):
        writer.flush(-1)
    writer.flush(1, timeout_ms=5_000)
    assert len(list(client.sample("queue", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))) == 1
    writer.end_episode(timeout_ms=10_000)
    assert writer.episode_steps == 0
    writer.close()
    with pytest.raises(RuntimeError, match="Close has been called"):
        writer.append(np.float32(0))


def test_end_episode_starts_a_new_episode(server, client):
    writer = client.trajectory_writer(num_keep_alive_refs=4)
    old = writer.append(np.float32(1))
    writer.end_episode(timeout_ms=10_000)
    assert writer.episode_steps == 0
    writer.append(np.float32(2))
    with pytest.raises(errors.InvalidArgumentError, match="expired"):
        writer.create_item("uniform", 1.0, old)
    writer.create_item("uniform", 1.0, writer.history[-1])
    writer.close(flush=True)
    assert server.tables["uniform"].size == 1
    (item_key,) = server.tables["uniform"].keys()
    chunk = next(iter(server.tables["uniform"].get(item_key).chunks.values()))
    assert chunk.start_index == 0


def test_end_episode_without_clearing_buffers_keeps_steps_referenceable(server, client):
    writer = client.trajectory_writer(num_keep_alive_refs=3)
    first = writer.append({"x": np.float32(1)})
    writer.end_episode(clear_buffers=False, timeout_ms=10_000)
    assert writer.episode_steps == 0 and not first["x"].expired
    writer.append({"x": np.float32(2)})
    # One item over the end of the episode: a step of each.
    writer.create_item("uniform", 1.0, {"x": writer.history["x"][-2:]})
    writer.append({"x": np.float32(3)})
    writer.append({"x": np.float32(4)})
    assert first["x"].expired  # three later steps pushed it out of the window
    with pytest.raises(errors.InvalidArgumentError, match="expired"):
        writer.create_item("uniform", 1.0, first)
    last = writer.history["x"][-1]
    writer.end_episode(clear_buffers=True, timeout_ms=10_000)
    assert len(writer.history["x"]) == 0
    with pytest.raises(RuntimeError, match="expired"):
        last.numpy()
    writer.close()
    sample = next(client.sample("uniform", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))
    np.testing.assert_array_equal(sample.data[0], [1.0, 2.0])
    episodes = {server.chunk_store.get([k])[0].episode_id for k in server.chunk_store.keys()}
    assert len(episodes) == 2  # each episode's steps are in chunks of their own


def test_legacy_writer_append_sequence_and_argument_checks(server, client):
    with client.writer(max_sequence_length=3) as writer:
        writer.append_sequence({"a": np.arange(5, dtype=np.int64), "b": np.ones((5, 2), np.float32)})
        assert writer.episode_steps == 5
        writer.create_item("queue", 3, 1.0)
        with pytest.raises(errors.InvalidArgumentError, match="larger than number of buffered timesteps"):
            writer.create_item("queue", 4, 1.0)
        with pytest.raises(errors.InvalidArgumentError, match="same leading"):
            writer.append_sequence({"a": np.arange(2), "b": np.ones((3, 2), np.float32)})
    a, b = next(client.sample("queue", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)).data
    np.testing.assert_array_equal(a, [2, 3, 4])
    assert b.shape == (3, 2)
    with client.writer(2) as writer:
        writer.append(np.float32(0))
        with pytest.raises(errors.InvalidArgumentError, match="larger than number of buffered"):
            writer.create_item("queue", 2, 1.0)


def test_writer_counts_items_the_server_has_not_acknowledged(client):
    """`num_unacked_items` (what a sharded writer counts as lost when its server dies) follows
    the server's acks: items a full queue table holds back stay unacknowledged until sampled."""
    from replay.insert_stream import InsertStream
    from replay.trajectory_writer import InsertStream as InsertStreamFromItsOldModule

    assert InsertStreamFromItsOldModule is InsertStream
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    for t in range(103):  # the "queue" table holds 100 items
        writer.append(np.float32(t))
        writer.create_item("queue", 1.0, writer.history[-1])
        if t == 99:
            writer.flush(timeout_ms=10_000)
            assert writer.num_unacked_items == 0
    writer.flush(block_until_num_items=3, timeout_ms=10_000)
    time.sleep(0.2)  # time for an ack that must not come
    assert writer.num_unacked_items == 3
    assert len(list(client.sample("queue", 3, timeout=10, emit_timesteps=False, unpack_as_table_signature=True))) == 3
    writer.flush(timeout_ms=10_000)
    assert writer.num_unacked_items == 0
    writer.close()


def test_string_leaves_may_differ_in_length_from_step_to_step_but_not_in_kind(server, client):
    """A string leaf is TensorFlow's tf.string: its steps have their own lengths (numpy gives
    each its own fixed width), in one chunk or across chunks; bytes never become str, and
    `Client.sample` gives str leaves back as UTF-8 bytes (tf.string), as Reverb's."""
    words = ["a", "longer string", "", "the longest string of them all", "mid"]
    writer = client.trajectory_writer(num_keep_alive_refs=2, chunk_length=2)
    for word in words:
        writer.append({"word": np.str_(word), "raw": np.bytes_(word.encode() * 2), "n": np.int64(len(word))})
        writer.create_item("uniform", 1.0, {"word": writer.history["word"][-1:],
                                            "raw": writer.history["raw"][-1:],
                                            "n": writer.history["n"][-1:]})
    with pytest.raises(errors.InvalidArgumentError, match=r"column \('raw',\).*<U16"):
        writer.append({"word": np.str_("x"), "raw": np.str_("bytes become str"), "n": np.int64(1)})
    with pytest.raises(errors.InvalidArgumentError, match=r"column \('n',\). Got double but expected int64"):
        writer.append({"word": np.str_("x"), "raw": np.bytes_(b"x"), "n": np.float64(1.0)})
    writer.flush(block_until_num_items=0, timeout_ms=10_000)
    sampled = {}
    for sample in client.sample("uniform", 200, timeout=10, emit_timesteps=False, unpack_as_table_signature=True):
        n, raw, word = (column[0] for column in sample.data)  # the item's leaves, keys sorted
        sampled[word.decode()] = (bytes(raw), int(n))
    assert sampled == {w: (w.encode() * 2, len(w)) for w in words}
    writer.close()


def test_incompressible_one_step_chunks_of_string_steps_keep_each_steps_width(server, client):
    """Steps of random bytes stop compressing, so their one-step chunks are stored raw by the
    writer's per-step path; each step keeps its own string width there too."""
    rng = np.random.default_rng(3)
    steps = [np.bytes_(rng.bytes(100 + 7 * i).replace(b"\0", b"z")) for i in range(40)]
    assert len({step.dtype for step in steps}) == len(steps)
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    for step in steps:
        writer.append(step)
        writer.create_item("uniform", 1.0, writer.history[-1])
    writer.flush(timeout_ms=10_000)
    stored = server.chunk_store.get(list(server.chunk_store.keys()))
    raw = [chunk for chunk in stored if not chunk.columns[0].compressed]
    assert len(raw) > 20  # the raw path took most of them
    assert all(chunk.columns[0].dtype == f"|S{len(chunk.columns[0].data)}" for chunk in raw)
    sampled = {bytes(sample.data[0]) for sample in client.sample("uniform", 400, timeout=10,
                                                                 emit_timesteps=False, unpack_as_table_signature=True)}
    assert sampled == {bytes(step) for step in steps}
    writer.close()


def test_a_leaf_that_stops_compressing_is_tried_ever_more_rarely_and_recovers(server, client, monkeypatch):
    import lz4.block

    from replay import trajectory_chunks

    tries = {"noise": 0, "zeros": 0}
    compress = lz4.block.compress

    def counting_compress(raw, **kwargs):
        tries["zeros" if not any(raw) else "noise"] += 1
        return compress(raw, **kwargs)

    monkeypatch.setattr(lz4.block, "compress", counting_compress)
    rng = np.random.default_rng(0)
    writer = client.trajectory_writer(num_keep_alive_refs=1)  # one chunk per step
    steps = 1200
    for _ in range(steps):
        writer.append({"noise": rng.random(100, dtype=np.float32), "zeros": np.zeros(100, np.float32)})
        writer.create_item("uniform", 1.0, writer.history["noise"][-1])
    writer.flush(timeout_ms=10_000)
    assert tries["zeros"] == steps  # a compressing leaf is always compressed
    # 8 failed tries, then single tries after skips of 64, 128, 256 and 512 chunks
    assert tries["noise"] == trajectory_chunks._INCOMPRESSIBLE_TRIES + 4

    # The same leaf turning compressible is compressed again within the longest skip.
    for _ in range(trajectory_chunks._INCOMPRESSIBLE_MAX_SKIP + 1):
        writer.append({"noise": np.zeros(100, np.float32), "zeros": np.zeros(100, np.float32)})
        writer.create_item("uniform", 1.0, writer.history["noise"][-1])
    writer.flush(timeout_ms=10_000)
    last_chunk = max(server.chunk_store.get(list(server.chunk_store.keys())), key=lambda c: c.start_index)
    assert last_chunk.columns[0].compressed
    assert last_chunk.nbytes == sum(len(c.data) for c in last_chunk.columns) < last_chunk.raw_nbytes
    sample = next(iter(client.sample("uniform", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)))
    assert sample.data[0].shape == (100,)
    writer.close()


@pytest.mark.parametrize("step, requested, limit", [
    (np.zeros(100, np.float32), None, 4096),      # 400 B steps: 4 MB of them, at most 4,096
    (np.zeros(300, np.float32), None, 3495),      # 1.2 kB steps: 4 MB of them
    (np.zeros(10, np.float32), None, 4096),       # 40 B steps: at most 4,096
    (np.zeros(10_000, np.float32), None, 1000),   # 40 kB steps: at least 1,000 items
    (np.zeros(100, np.float32), 50, 50),          # an explicit limit is kept
])
def test_unacknowledged_items_block_the_writer_at_its_limit(server, client, step, requested, limit):
    """Without max_in_flight_items a writer sizes its flow control from its first step; writes
    into a full queue table (its inserts wait) block, within the limit (the window falls when
    the server reports waiting, see replay.insert_stream)."""
    import threading

    writer = client.trajectory_writer(num_keep_alive_refs=1, max_in_flight_items=requested)
    outcome = []

    def write():
        try:
            for _ in range(limit + 200):
                writer.append(step)
                writer.create_item("queue", 1.0, writer.history[-1])
            outcome.append("not blocked")
        except errors.ReplayError as e:  # the cancelled stream, below
            outcome.append(e)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while server.tables["queue"].size < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    blocked_at = writer.num_unacked_items
    time.sleep(0.3)  # a writer that did not block would go on here
    assert writer.max_in_flight_items == limit
    assert 0 < writer.num_unacked_items == blocked_at <= limit + 1  # the call that went over waits
    assert thread.is_alive() and not outcome
    writer.close(flush=False, cancel=True)
    thread.join(timeout=10)
    assert outcome and outcome[0] != "not blocked"
    assert server.tables["queue"].size == 100  # the queue took what it holds and no more


def test_create_item_checks_the_table_signature_as_reverb(server, client):
    """The "typed" table's signature is one step ({"obs": float32 [3], "action": int64 []}):
    items of one-step slices ([-1:], a time dimension of 1) or two steps are refused at
    create_item, before anything is sent, with Reverb's message; squeezed steps fit."""
    def step(t):
        return {"obs": np.full(3, t, np.float32), "action": np.int64(t)}

    from replay.trajectory_writer import TrajectoryWriter

    writer = TrajectoryWriter(client, num_keep_alive_refs=2, validate_items=True)
    writer.append(step(0))
    writer.append(step(1))
    history = writer.history
    for length in (1, 2):
        with pytest.raises(errors.SignatureMismatchError, match=(
                "inconsistent with the table signature. The table expects column 0 to be a int64 "
                rf"\[\] tensor but got a int64 \[{length}\] tensor")):
            writer.create_item("typed", 1.0, {"obs": history["obs"][-1], "action": history["action"][-length:]})
    with pytest.raises(ValueError, match="The trajectory has 1 columns but the table signature has 2"):
        writer.create_item("typed", 1.0, {"obs": history["obs"][-1]})
    with pytest.raises(ValueError, match="table 'nope' since the table could not be found"):
        writer.create_item("nope", 1.0, {"obs": history["obs"][-1], "action": history["action"][-1]})
    writer.create_item("typed", 1.0, {"obs": history["obs"][-1], "action": history["action"][-1]})
    writer.flush(timeout_ms=10_000)  # the refusals left the writer usable
    assert server.tables["typed"].size == 1
    unchecked = TrajectoryWriter(client, num_keep_alive_refs=1)
    unchecked.append(step(2))
    unchecked.create_item("nope", 1.0, unchecked.history["obs"][-1])  # the server refuses it
    with pytest.raises(errors.NotFoundError):
        unchecked.flush(timeout_ms=10_000)
    writer.close()
    unchecked.close()


@pytest.mark.parametrize("as_list", [False, True])
def test_extend_appends_a_batch_of_steps_as_an_append_loop_would(client, as_list):
    writer = client.trajectory_writer(num_keep_alive_refs=3)
    writer.append({"x": np.float32(-1), "y": np.zeros(2, np.int64)})
    batch = {"x": np.arange(5, dtype=np.float32), "y": np.arange(10, dtype=np.int64).reshape(5, 2)}
    if as_list:
        batch = [{"x": batch["x"][t], "y": batch["y"][t]} for t in range(5)]
    writer.extend(batch)
    assert writer.episode_steps == 6 and len(writer.history["x"]) == 6
    np.testing.assert_array_equal(writer.history["x"][-3:].numpy(), [2, 3, 4])
    np.testing.assert_array_equal(writer.history["y"][5].numpy(), [8, 9])
    with pytest.raises(ValueError, match="None data references"):
        writer.history["x"][2]  # older than the three kept-alive steps
    writer.create_item("uniform", 1.0, {"x": writer.history["x"][-3:], "y": writer.history["y"][-1]})
    writer.append({"x": np.float32(5), "y": np.zeros(2, np.int64)})
    writer.create_item("uniform", 1.0, {"x": writer.history["x"][-2:], "y": writer.history["y"][-2]})
    with pytest.raises(errors.InvalidArgumentError, match="rows of shape"):
        writer.extend({"x": np.zeros(2, np.float32), "y": np.zeros((2, 3), np.int64)})
    writer.close(flush=True)
    sampled = client.sample("uniform", 50, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)
    items = sorted((s.data[0].tolist(), s.data[1].tolist()) for s in sampled)
    assert ([2.0, 3.0, 4.0], [8, 9]) in items and ([4.0, 5.0], [8, 9]) in items


@pytest.mark.parametrize("keep", [1, 3, 8])
def test_extend_keeps_and_releases_the_same_steps_as_an_append_loop(server, client, keep):
    """Batches longer and shorter than the keep-alive window, mixed with single appends: the
    history, the expired cells and the items match an append loop's, and the server holds no
    chunk older than the kept-alive steps."""
    sizes = [2, 5, 1, 9, 3, 0, 4, 1, 7]
    rng = np.random.default_rng(keep)
    batches = [rng.random((n, 3), dtype=np.float32) for n in sizes]

    def write(way):
        writer = client.trajectory_writer(num_keep_alive_refs=keep)
        seen = []
        for i, batch in enumerate(batches):
            if way == "extend" and i % 3 != 2:
                writer.extend(batch)
            else:
                for row in batch:
                    writer.append(row)
            if len(writer.history):
                writer.create_item("fifo_once", 1.0, writer.history[-min(keep, len(writer.history)):])
            cells = list(writer.history)
            seen.append([(None if c is None else (c.expired, c.numpy().tolist())) for c in cells])
        writer.flush(timeout_ms=10_000)
        # every item is sampled once and deleted: only the kept-alive steps' chunks may stay
        table = server.tables["fifo_once"]
        items = []
        while table.size:
            items += [s.data[0].tolist() for s in client.sample(
                "fifo_once", table.size, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)]
        seen.append(sorted(items))
        held = len(server.chunk_store.keys())  # chunks holding one of the last `keep` steps at most
        writer.close()
        return seen, held

    extended, held_extended = write("extend")
    appended, held_appended = write("append")
    assert extended == appended
    assert held_extended <= keep and held_appended <= keep


def test_extend_stores_strided_and_string_batches_as_an_append_loop_does(server, client):
    """A batch's columns are encoded without a copy per step: a strided view (a transposed
    array) and byte-string rows of another width than the first batch's reach the server with
    the values an append loop stores."""
    table = server.tables["fifo_once"]

    def write(way):
        writer = client.trajectory_writer(num_keep_alive_refs=4)
        batches = [{"x": np.arange(12, dtype=np.float32).reshape(3, 4).T,  # 4 rows, not C-contiguous
                    "s": np.array([b"a", b"bb", b"c", b"dd"])},
                   {"x": np.full((4, 3), 7, np.float32), "s": np.array([b"eee", b"f", b"g", b"h"])}]
        for batch in batches:
            if way == "extend":
                writer.extend(batch)
            else:
                for t in range(4):
                    writer.append({k: v[t] for k, v in batch.items()})
            writer.create_item("fifo_once", 1.0, {k: h[-4:] for k, h in writer.history.items()})
        writer.close(flush=True)
        out = []
        while table.size:
            out += [[c.tolist() for c in s.data] for s in client.sample(
                "fifo_once", table.size, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)]
        return out

    extended = write("extend")
    assert extended == write("append")
    assert extended[0][1] == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]


def test_a_history_slice_of_one_chunk_is_checked_for_expiry_as_a_whole(client):
    writer = client.trajectory_writer(num_keep_alive_refs=3)
    writer.extend(np.arange(3, dtype=np.float32))
    column = writer.history[-3:]  # the three cells of one chunk
    writer.append(np.float32(3))  # the first of them leaves the keep-alive window
    with pytest.raises(errors.InvalidArgumentError, match="expired"):
        writer.create_item("uniform", 1.0, column)
    writer.create_item("uniform", 1.0, writer.history[-2:])
    np.testing.assert_array_equal([cell.numpy() for cell in column], [0, 1, 2])  # still readable
    writer.close(flush=True)


def test_every_way_of_reading_the_history_sees_extended_steps_as_appended_ones(client):
    """extend's steps enter the history as cells made when first read: every index, slice and
    item path reads them as the same steps appended one by one."""
    batch = {"x": np.arange(12, dtype=np.float32).reshape(6, 2), "y": np.arange(6, dtype=np.int64)}

    def reads(way):
        writer = client.trajectory_writer(num_keep_alive_refs=5)
        writer.append({"x": np.float32([-2, -1]), "y": np.int64(-1)})
        if way == "extend":
            writer.extend({k: v[:3] for k, v in batch.items()})
            writer.extend({k: v[3:] for k, v in batch.items()})
        else:
            for t in range(6):
                writer.append({k: v[t] for k, v in batch.items()})
        x, y = writer.history["x"], writer.history["y"]
        out = [x[-1].numpy().tolist(), x[3].numpy().tolist(), y[[2, -1]].numpy().tolist(),
               x[-5:].numpy().tolist(), x[-4:-1].numpy().tolist(), y[:6].numpy().tolist(),
               x[-2:].numpy().tolist(), [c is None or c.expired for c in x], len(y)]
        writer.create_item("uniform", 1.0, {"x": x[-4:], "y": y[-1]})  # over both batches
        writer.create_item("uniform", 1.0, {"x": x[-2:], "y": y[-3:]})
        writer.create_item_from_last_steps("uniform", 1.0, 3)
        writer.append({"x": np.float32([9, 9]), "y": np.int64(9)}, partial_step=True)
        out.append(writer.history["y"][-1].numpy().tolist())
        writer.end_episode(clear_buffers=True, timeout_ms=10_000)
        writer.close()
        return out

    assert reads("extend") == reads("append")


def test_legacy_writer_is_reverbs_and_replay_reverb_reexports_it(server, client):
    import replay.reverb as reverb
    from replay.writer import Writer

    assert reverb.Writer is Writer and reverb.client.Writer is Writer
    writer = client.writer(max_sequence_length=2)
    writer.append({"x": np.int64(1)})
    with pytest.raises(ValueError, match="num_timesteps .0. must be a positive integer"):
        writer.create_item("queue", 0, 1.0)
    with pytest.raises(ValueError, match="larger than number of buffered timesteps"):
        writer.create_item("queue", 2, 1.0)
    writer.append({"x": np.int64(2)})
    writer.append({"x": np.int64(3)})
    writer.create_item("queue", 2, 1.0)
    writer.close()  # flushes
    with pytest.raises(ValueError, match="close\\(\\) has already been called"):
        writer.close()
    with pytest.raises(ValueError, match="Cannot reuse already closed Writer"):
        with writer:
            pass
    sample = next(client.sample("queue", 1, timeout=10, emit_timesteps=False))
    np.testing.assert_array_equal(sample.data[0], [2, 3])


@pytest.mark.parametrize("clear_buffers", [True, False])
def test_end_episode_with_an_open_partial_step(server, client, clear_buffers):
    """As Reverb's: clearing the buffers drops the open step; without, it stays open and is
    completed (as step 0) in the new episode."""
    writer = client.trajectory_writer(num_keep_alive_refs=2)
    writer.append({"a": np.int64(1), "b": np.int64(1)})
    writer.append({"a": np.int64(2)}, partial_step=True)
    writer.end_episode(clear_buffers=clear_buffers, timeout_ms=10_000)
    assert writer.episode_steps == 0
    if clear_buffers:
        assert len(writer.history["a"]) == 0
        writer.append({"a": np.int64(3), "b": np.int64(3)})
    else:
        writer.append({"b": np.int64(2)})
    assert writer.episode_steps == 1
    writer.create_item("queue", 1.0, {"a": writer.history["a"][-1], "b": writer.history["b"][-1]})
    writer.close(flush=True)
    a, b = next(client.sample("queue", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)).data
    assert (int(a), int(b)) == ((3, 3) if clear_buffers else (2, 2))


def test_only_writers_that_check_items_ask_the_server_to_describe_its_tables(server, client, monkeypatch):
    """Describing every table costs the server per table; `Client.insert` and writers that do not
    check items never ask for it, and a checking writer's client asks once (its cache serves the
    writers after it), so a server of many tables does not slow every insert."""
    from replay import server as server_module
    from replay.trajectory_writer import TrajectoryWriter

    described = []
    original = server_module._Servicer._tables_response

    def counting_tables_response(self):
        described.append(1)
        return original(self)

    monkeypatch.setattr(server_module._Servicer, "_tables_response", counting_tables_response)
    for i in range(5):
        client.insert(np.full(3, i, np.float32), {"uniform": 1.0})
    assert server.tables["uniform"].size == 5
    assert described == []
    step = {"obs": np.zeros(3, np.float32), "action": np.int64(0)}
    for _ in range(3):
        writer = TrajectoryWriter(client, num_keep_alive_refs=1, validate_items=True)
        refs = writer.append(step)
        writer.create_item("typed", 1.0, {"obs": refs["obs"], "action": refs["action"]})
        writer.flush(timeout_ms=10_000)
        writer.close()
    assert server.tables["typed"].size == 3
    assert len(described) == 1
