"""The trainer's embedded replay restore (`ReplayService.load_checkpoint`) follows the replay
server's restore rule: the tables the trainer declares keep their settings, the checkpoint
supplies the items, items sampled `max_times_sampled` times go, and the log names what changed."""
import logging

import numpy as np
import pytest

from replay import rate_limiters, selectors
from replay.specs import TensorSpec
from replay.table import Table
from tfrl.errors import CheckpointError
from tfrl.replay_hosting import ReplayService

pytestmark = pytest.mark.timeout(120)

SIGNATURE = {"x": TensorSpec((), np.int64)}


def _service(table):
    service = ReplayService({})
    service.add_table(table)
    service.start()
    return service


def _write(client, values):
    with client.trajectory_writer(1) as writer:
        for value in values:
            writer.append({"x": np.int64(value)})
            writer.create_item("replay", 1.0, {"x": writer.history["x"][-1]})


def test_the_declared_table_settings_win_and_sampled_out_items_are_deleted(tmp_path, caplog):
    saved = _service(Table("replay", selectors.Lifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                           signature=SIGNATURE))
    try:
        client = saved.client()
        _write(client, range(10))
        sampled = [int(s.data[0]) for s in client.sample("replay", 3, emit_timesteps=False, timeout=10)]
        assert sampled == [9, 9, 9]  # the Lifo sampler keeps the newest: item 9 sampled 3 times
        saved.save_checkpoint(str(tmp_path))
    finally:
        saved.stop()

    # declared: smaller, sampled once at most, a rate limiter that needs 2 items and 1 sample per insert
    restored = _service(Table("replay", selectors.Fifo(), selectors.Fifo(), 6,
                              rate_limiters.SampleToInsertRatio(1.0, 2, 10.0), max_times_sampled=1,
                              signature=SIGNATURE))
    try:
        with caplog.at_level(logging.WARNING, logger="replay.checkpoint"):
            restored.load_checkpoint(str(tmp_path))
        table = restored._started_server().tables["replay"]  # noqa: SLF001 - the served table
        assert table.max_size == 6 and table.max_times_sampled == 1
        # item 9 (sampled 3 times) is deleted, then the Fifo remover evicts 0-2 down to 6 items
        client = restored.client()
        got = [int(s.data[0]) for s in client.sample("replay", 4, emit_timesteps=False, timeout=10)]
        assert got == [3, 4, 5, 6]  # each sampled once, then gone: max_times_sampled=1
        assert any("declared settings" in r.getMessage() and "max_size 100 -> 6" in r.getMessage()
                   for r in caplog.records), [r.getMessage() for r in caplog.records]
        _write(client, range(10, 14))  # inserts go on under the declared rate limiter
        got = [int(s.data[0]) for s in client.sample("replay", 4, emit_timesteps=False, timeout=10)]
        assert got == [7, 8, 10, 11]
    finally:
        restored.stop()


def test_a_checkpoint_of_tables_the_trainer_lacks_is_refused(tmp_path):
    saved = _service(Table("other", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1)))
    saved.save_checkpoint(str(tmp_path))
    saved.stop()
    restored = _service(Table("replay", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1)))
    try:
        with pytest.raises(CheckpointError, match=r"holds tables \['other'\]"):
            restored.load_checkpoint(str(tmp_path))
    finally:
        restored.stop()
