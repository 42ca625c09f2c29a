"""`tfrl rollout CKPT --out DIR` records the episodes it plays, whole and with the policy's action
probabilities, in the files `input: DIR` reads."""
import glob

import numpy as np
import pytest

from tfrl.registry import get_trainer_class
from tfrl.cli import main
from tfrl.offline.input_reader import read_file


@pytest.mark.timeout(240)
def test_rollout_out_records_whole_episodes(ray_session, tmp_path, capsys):
    trainer = get_trainer_class("PG")(config={
        "env": "CartPole-v1", "num_workers": 0, "model": {"fcnet_hiddens": [8]},
        "rollout_fragment_length": 50, "train_batch_size": 50})
    try:
        trainer.train()
        checkpoint = trainer.save(str(tmp_path / "checkpoints"))
    finally:
        trainer.stop()
    out = str(tmp_path / "episodes")
    assert main(["rollout", checkpoint, "--episodes", "3", "--out", out]) == 0
    printed = capsys.readouterr().out
    assert "mean return over 3 episodes" in printed and f"recorded into {out}" in printed
    batches = [b for path in sorted(glob.glob(out + "/*.tfrecord")) for b in read_file(path)]
    assert len(batches) == 3  # one whole episode per batch
    for batch in batches:
        assert len(set(batch["eps_id"].tolist())) == 1
        assert batch["t"][0] == 0
        assert batch["terminateds"][-1] or batch["truncateds"][-1]
        assert not np.any(batch["terminateds"][:-1])
        assert np.all((batch["action_prob"] > 0) & (batch["action_prob"] <= 1))
    returns = [float(line.split()[-1]) for line in printed.splitlines()
               if line.startswith("episode ")]
    assert returns == [float(b["rewards"].sum()) for b in batches]
