"""replay.reverb.structured_writer and pattern_dataset: patterns, conditions and priorities
against a real server on loopback, and the same patterns over a tf.data stream."""
import numpy as np
import pytest
import tensorflow as tf

import replay.reverb as reverb
from replay.reverb import pattern_dataset, structured_writer

Condition = structured_writer.Condition


@pytest.fixture
def client():
    server = reverb.Server([reverb.Table.queue("q", 100), reverb.Table.queue("ends", 100)])
    yield reverb.Client(f"localhost:{server.port}")
    server.stop()


def _contents(client, table):
    size = client.server_info()[table].current_size
    if not size:
        return []
    return [(s.info.priority, s.data) for s in client.sample(table, size, emit_timesteps=False)]


def test_patterns_conditions_and_td_priority_make_the_items_reverb_makes(client):
    ref = structured_writer.create_reference_step({"obs": None, "td": None})
    pattern = {"obs_pair": ref["obs"][-3:-1], "td": ref["td"][-1]}
    every_other = structured_writer.create_config(
        pattern, "q", conditions=[Condition.step_index() % 2 == 0],
        priority=structured_writer.td_error(0.5, {"obs": None, "td": None}, lambda s: s["td"]))
    at_end = structured_writer.create_config(ref["obs"][-2:], "ends", conditions=[Condition.is_end_episode()])
    writer = client.structured_writer([every_other, at_end])
    for i in range(6):
        writer.append({"obs": np.float32(i), "td": np.float32(-i)}, partial_step=True)
        assert writer.step_is_open
        writer.append({"obs": None, "td": None})
    writer.end_episode()
    items = _contents(client, "q")
    # step 0 lacks the 3-step history; steps 2 and 4 apply; the priority is |td| of the item.
    assert [p for p, _ in items] == [2.0, 4.0]
    np.testing.assert_array_equal(items[0][1][0], np.array([0, 1], np.float32))
    np.testing.assert_array_equal(items[1][1][0], np.array([2, 3], np.float32))
    assert items[1][1][1].shape == () and items[1][1][1] == -4
    ends = _contents(client, "ends")
    assert len(ends) == 1
    np.testing.assert_array_equal(ends[0][1][0], np.array([4, 5], np.float32))


def test_a_changed_dtype_names_the_column_and_keeps_earlier_items(client):
    writer = client.structured_writer(
        [structured_writer.create_config(structured_writer.create_reference_step([None])[0][-1], "q")])
    writer.append([1.0])
    with pytest.raises(ValueError, match=r"column 0 \(path=\(0,\)\). Got int64 but expected double"):
        writer.append([2])
    writer.flush()
    assert [d for _, d in _contents(client, "q")] == [[1.0]]


def test_infer_signature_merges_lengths_and_rejects_other_tables():
    ref = structured_writer.create_reference_step({"a": None})
    step = {"a": np.zeros([3], np.float32)}
    configs = [structured_writer.create_config({"x": ref["a"][-2:]}, "t"),
               structured_writer.create_config({"x": ref["a"][-5::2]}, "t")]
    assert structured_writer.infer_signature(configs, step) == {"x": tf.TensorSpec([None, 3], tf.float32, "x")}
    assert structured_writer.infer_signature(configs[1:], step)["x"].shape == [3, 3]
    with pytest.raises(ValueError, match="same table"):
        structured_writer.infer_signature(configs + [structured_writer.create_config({"x": ref["a"][-1]}, "u")],
                                          step)


def test_pattern_dataset_applies_the_writer_rules_within_episodes():
    ref = structured_writer.create_reference_step({"x": None, "last": None})
    config = structured_writer.create_config({"x": ref["x"][-2], "next": ref["x"][-1]}, "t")
    steps = tf.data.Dataset.from_tensor_slices({"x": [0, 1, 2, 3, 4], "last": [False, True, False, False, True]})
    got = list(pattern_dataset.PatternDataset(steps, [config], True, lambda s: s["last"]).as_numpy_iterator())
    assert [(g["x"], g["next"]) for g in got] == [(0, 1), (2, 3), (3, 4)]
    with pytest.raises(ValueError, match="must return `bool`"):
        pattern_dataset.PatternDataset(steps, [config], True, lambda s: s["x"])


def test_a_partial_step_with_the_fields_a_pattern_needs_makes_its_item_once(client):
    """As Reverb's StructuredWriter: configs apply after every append, partial ones included,
    at most once per step."""
    ref = structured_writer.create_reference_step({"a": None, "b": None})
    writer = client.structured_writer([structured_writer.create_config(ref["a"][-1:], "q")])
    writer.append({"a": np.int64(1), "b": None}, partial_step=True)
    writer.flush()
    assert [d[0].tolist() for _, d in _contents(client, "q")] == [[1]]
    writer.append({"a": None, "b": np.int64(10)})  # completes the step: no second item of it
    writer.append({"a": np.int64(2), "b": np.int64(20)})
    writer.flush()
    assert [d[0].tolist() for _, d in _contents(client, "q")] == [[2]]


def test_a_slice_with_stop_zero_reaches_the_newest_step(client):
    ref = structured_writer.create_reference_step([None])
    writer = client.structured_writer([structured_writer.create_config(ref[0][-2:0], "q")])
    for i in range(3):
        writer.append([np.int64(i)])
    writer.flush()
    assert [d[0].tolist() for _, d in _contents(client, "q")] == [[0, 1], [1, 2]]


@pytest.mark.parametrize("index, message", [
    (slice(-1, -1), r"position 0: `stop` \(-1\) must be > `start` \(-1\)"),
    (slice(None, -2, 2), "`step` must only be set when `start` is set"),
    (slice(0, None), "`start` must be < 0 but got 0"),
    (slice(-2, 1), "`stop` must be <= 0 but got 1"),
])
def test_an_invalid_pattern_is_refused_when_the_writer_is_made(client, index, message):
    ref = structured_writer.create_reference_step([None])
    config = structured_writer.create_config(ref[0][index], "q")
    with pytest.raises(ValueError, match=message):
        client.structured_writer([config])


def test_steps_since_applied_keep_counting_across_episodes(client):
    """Reverb keeps each config's count of steps since it applied over end_episode."""
    ref = structured_writer.create_reference_step([None])
    config = structured_writer.create_config(ref[0][-1], "q", conditions=[Condition.steps_since_applied() == 3])
    writer = client.structured_writer([config])
    writer.append([np.int64(0)])
    writer.append([np.int64(1)])
    writer.end_episode()
    writer.append([np.int64(2)])  # the third step since the start: applies
    writer.append([np.int64(3)])
    writer.flush()
    assert [d[0].tolist() for _, d in _contents(client, "q")] == [2]
