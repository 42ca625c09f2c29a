"""RLlib-classic JSON lines: what a worker records reads back column for column, a line in
classic RLlib's own spelling (`dones`, no `terminateds`) reads too, and a trainer learns from
JSON input; `input: {"sampler": p, DIR: 1 - p}` mixes env samples and recorded batches."""
import glob
import json
import os

import numpy as np
import pytest

from tfrl.agents.pg import PGTFPolicy
from tfrl.registry import get_trainer_class
from tfrl.errors import InvalidConfigError
from tfrl.offline.input_reader import read_file
from tfrl.rollout import RolloutWorker

SMALL = {"fcnet_hiddens": [8]}


def test_json_output_round_trips_every_column(tmp_path):
    out = str(tmp_path / "json")
    worker = RolloutWorker("CartPole-v1", PGTFPolicy, config={
        "model": SMALL, "rollout_fragment_length": 40, "seed": 4, "output": out,
        "output_format": "json"})
    try:
        sampled = [worker.sample() for _ in range(2)]
    finally:
        worker.stop()
    (path,) = glob.glob(os.path.join(out, "*.json"))
    lines = [json.loads(line) for line in open(path)]
    assert [line["type"] for line in lines] == ["SampleBatch", "SampleBatch"]
    for line, batch in zip(lines, sampled):
        assert line["dones"] == list(np.asarray(batch["terminateds"]) | batch["truncateds"])
    read = list(read_file(path))
    for original, back in zip(sampled, read):
        assert back.count == original.count == 40
        for key in ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds",
                    "eps_id", "t", "action_logp", "action_dist_inputs", "advantages"):
            assert back[key].dtype == np.asarray(original[key]).dtype, key
            np.testing.assert_array_equal(back[key], original[key], err_msg=key)
        np.testing.assert_allclose(back["action_prob"], np.exp(original["action_logp"]),
                                   rtol=1e-6)


def test_a_classic_rllib_line_reads_with_dones_as_terminateds(tmp_path):
    classic = {"type": "SampleBatch", "obs": [[0.0, 0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.4]],
               "new_obs": [[0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.5]], "actions": [1, 0],
               "rewards": [1.0, 1.0], "dones": [False, True], "eps_id": [7, 7], "t": [0, 1],
               "action_prob": [0.5, 0.5], "infos": [{}, {}]}
    path = tmp_path / "classic.json"
    path.write_text(json.dumps(classic) + "\n")
    (batch,) = list(read_file(str(path)))
    assert batch.count == 2
    assert batch["obs"].dtype == np.float32 and batch["actions"].dtype == np.int64
    np.testing.assert_array_equal(batch["terminateds"], [False, True])
    np.testing.assert_array_equal(batch["truncateds"], [False, False])


@pytest.mark.timeout(240)
def test_a_trainer_learns_from_json_input_and_mixes_it_with_the_sampler(ray_session, tmp_path):
    out = str(tmp_path / "json")
    worker = RolloutWorker("CartPole-v1", PGTFPolicy, config={
        "model": SMALL, "rollout_fragment_length": 50, "seed": 5, "output": out,
        "output_format": "json"})
    try:
        for _ in range(4):
            worker.sample()
    finally:
        worker.stop()
    trainer = get_trainer_class("MARWIL")(config={
        "env": "CartPole-v1", "model": SMALL, "train_batch_size": 200, "seed": 0,
        "input": {"sampler": 0.5, out: 0.5}})
    try:
        before = [w.copy() for w in trainer.get_policy().get_weights()]
        local = trainer.workers.local_worker()
        sources = []
        for _ in range(12):
            local.input_reader.next()
            sources.append(local.input_reader.last_source)
        result = trainer.train()
        after = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    assert set(sources) == {"sampler", out}
    assert result["info"]["num_steps_sampled"] >= 200
    assert any(not np.allclose(b, a) for b, a in zip(before, after))


def test_mixing_probabilities_must_sum_to_one(tmp_path):
    (tmp_path / "x.json").write_text("")
    with pytest.raises(InvalidConfigError, match="sum to"):
        RolloutWorker("CartPole-v1", PGTFPolicy, config={
            "model": SMALL, "input": {"sampler": 0.5, str(tmp_path): 0.2}})
