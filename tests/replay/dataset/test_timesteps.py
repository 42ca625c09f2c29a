"""ReplayDataset(emit_timesteps=True), the code behind Reverb's TimestepDataset: the steps of the
sampled items in order, each with its item's info, cut from the received blocks; and
`sample_blocks.split_steps` on its own."""
import numpy as np
import pytest
import tensorflow as tf

from replay import errors, rate_limiters, selectors
from replay.dataset import ReplayDataset
from replay.replay_sample import SampleInfo
from replay.sample_blocks import split_steps
from replay.table import Table


def _queue(name="steps"):
    return Table(name, selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1), max_times_sampled=1)


def _write_items(client, lengths):
    """Items of `lengths` steps each over one episode; step t has observation [t, -t] and action t."""
    step = 0
    with client.trajectory_writer(max(lengths)) as writer:
        for length in lengths:
            for _ in range(length):
                writer.append({"obs": np.array([step, -step], np.float32), "action": np.int64(step)})
                step += 1
            writer.create_item("steps", 1.0, {"obs": writer.history["obs"][-length:],
                                              "action": writer.history["action"][-length:]})
        writer.flush()


@pytest.mark.parametrize("lengths", [[3, 3, 3, 3], [2, 3, 1, 4]], ids=["equal", "different"])
def test_steps_come_in_order_each_with_its_items_info(start_server, lengths):
    server = start_server([_queue()])
    client = server.localhost_client()
    _write_items(client, lengths)
    total = sum(lengths)
    with ReplayDataset(server.address, "steps", {"obs": tf.float32, "action": tf.int64},
                       {"obs": [2], "action": []}, max_in_flight_samples_per_worker=8,
                       emit_timesteps=True, max_samples=len(lengths)) as ds:
        assert ds.element_spec.data["obs"].shape == [2]
        batches = list(ds.batch(5))
    actions = np.concatenate([b.data["action"].numpy() for b in batches])
    obs = np.concatenate([b.data["obs"].numpy() for b in batches])
    keys = np.concatenate([b.info.key.numpy() for b in batches])
    np.testing.assert_array_equal(actions, np.arange(total))
    np.testing.assert_array_equal(obs, np.stack([np.arange(total), -np.arange(total)], 1).astype(np.float32))
    # every step of an item carries that item's key, and the items' keys differ
    bounds = np.cumsum([0] + lengths)
    for start, stop in zip(bounds[:-1], bounds[1:]):
        assert len(set(keys[start:stop].tolist())) == 1
    assert len(set(keys.tolist())) == len(lengths)


def test_a_dataset_of_items_still_yields_whole_items(start_server):
    server = start_server([_queue()])
    _write_items(server.localhost_client(), [3, 3])
    with ReplayDataset(server.address, "steps", {"obs": tf.float32, "action": tf.int64},
                       {"obs": [3, 2], "action": [3]}, max_in_flight_samples_per_worker=8, max_samples=2) as ds:
        actions = [s.data["action"].numpy().tolist() for s in ds]
    assert actions == [[0, 1, 2], [3, 4, 5]]


def _info(n):
    return SampleInfo(np.arange(n, dtype=np.uint64), np.ones(n), np.full(n, 9, np.int64), np.ones(n),
                      np.ones(n, np.int32))


def test_split_steps_reshapes_sequences_and_keeps_single_steps():
    info, columns = split_steps((_info(2), [np.arange(12, dtype=np.int64).reshape(2, 3, 2),
                                            np.arange(6, dtype=np.int32).reshape(2, 3)]), [1, 0])
    assert columns[0].shape == (6, 2) and columns[1].shape == (6,)
    np.testing.assert_array_equal(info.key, [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(columns[1], np.arange(6))
    info, columns = split_steps((_info(2), [np.zeros((2, 4), np.float32)]), [1])  # steps of rank 1
    assert columns[0].shape == (2, 4) and info.key.tolist() == [0, 1]


def test_split_steps_refuses_columns_of_different_lengths_and_scalars_as_sequences():
    with pytest.raises(errors.InvalidArgumentError, match="different lengths"):
        split_steps((_info(1), [np.zeros((1, 3)), np.zeros((1, 2))]), [0, 0])
    with pytest.raises(errors.InvalidArgumentError, match="neither one step"):
        split_steps((_info(1), [np.zeros((1,))]), [None])


def test_auto_in_flight_is_a_whole_multiple_of_one_workers_budget():
    from replay.dataset import auto_in_flight

    assert auto_in_flight(1, 4_000) == 512
    assert auto_in_flight(7, 4_000) == 511
    assert auto_in_flight(1024, 4_000) == 1024  # never below one worker's
    assert auto_in_flight(8, 400_000) == 40  # about 16 MB of 400 kB items
    assert auto_in_flight(3, None) == 3  # items of unknown size: one worker's


def _num_samples(client, table):
    return client.server_info()[table].num_samples


@pytest.mark.parametrize("queue", [False, True], ids=["uniform", "queue"])
def test_automatic_workers_keep_several_budgets_in_flight_except_on_a_queue(start_server, queue):
    import time

    table = (_queue("t") if queue else
             Table("t", selectors.Uniform(seed=0), selectors.Fifo(), 100, rate_limiters.MinSize(1)))
    server = start_server([table])
    client = server.localhost_client()
    with client.trajectory_writer(1) as writer:
        for i in range(50):
            writer.create_item("t", 1.0, writer.append(np.float32(i)))
        writer.flush()
    with ReplayDataset(server.address, "t", tf.float32, [], max_in_flight_samples_per_worker=2) as ds:
        first = next(iter(ds))
        deadline = time.monotonic() + 20
        while not queue and _num_samples(client, "t") < 512 and time.monotonic() < deadline:
            time.sleep(0.05)
        if queue:
            time.sleep(0.5)
            # a queue's reader takes about its own budget (and the pipeline's few blocks) only
            assert _num_samples(client, "t") <= 12
            assert float(first.data) == 0.0
        else:
            # 256 workers' budgets of 2 in one stream (once received, the budget is granted again)
            taken = _num_samples(client, "t")
            assert taken >= 512 and taken % 2 == 0
