"""`replay_checkpoint: True`: a trainer checkpoint holds the replay tables (items, priorities,
counters), and restoring it into a new trainer reloads them into its embedded replay server, so
training resumes without losing the buffer."""
import os

import numpy as np
import pytest

from replay.checkpoint import Checkpointer
from tfrl.agents.dqn.dqn import DQNTrainer


def _table_in(checkpoint_dir):
    """(items as {key: (priority, times_sampled)}, counters) of the replay table saved there."""
    (table,) = [t for t in Checkpointer.load(Checkpointer(checkpoint_dir).latest())
                if t.name == "replay"]
    _, items, counters = table.checkpoint()
    return {i.key: (i.priority, i.times_sampled) for i in items}, counters


@pytest.mark.timeout(300)
def test_dqn_checkpoint_restores_the_prioritized_replay_table(ray_session, small_config, tmp_path):
    config = dict(small_config("DQN"), replay_checkpoint=True)
    trainer = DQNTrainer(config=config, env="CartPole-v1")
    try:
        trainer.train()
        result = trainer.train()
        assert result["info"]["num_steps_trained"] > 0, "learning must have started"
        path = trainer.save(str(tmp_path / "checkpoints"))
    finally:
        trainer.stop()
    saved_items, saved_counters = _table_in(os.path.join(os.path.dirname(path), "replay"))
    assert len(saved_items) >= 32
    priorities = np.array([p for p, _ in saved_items.values()])
    assert len(np.unique(priorities)) > 1, "the learner's TD errors should have set priorities"

    restored = DQNTrainer(config=config, env="CartPole-v1")
    try:
        restored.restore(path)
        restored.replay.save_checkpoint(str(tmp_path / "view"))
        items, counters = _table_in(str(tmp_path / "view"))
        assert set(items) == set(saved_items)
        for key, (priority, times_sampled) in items.items():
            assert priority == saved_items[key][0]
            # the learner's dataset may already prefetch from the restored table
            assert times_sampled >= saved_items[key][1]
        for name in ("num_inserts", "num_deletes", "num_evictions", "num_updates"):
            assert counters[name] == saved_counters[name], name
        assert counters["num_samples"] >= saved_counters["num_samples"]
        steps_trained = restored.optimizer.num_steps_trained
        assert steps_trained == result["info"]["num_steps_trained"]
        # training resumes on the restored buffer
        assert restored.train()["info"]["num_steps_trained"] > steps_trained
    finally:
        restored.stop()
