"""A replay table as `input`: a rollout worker writes CartPole experience into a replay table
(and records the same batches to files), the server is checkpointed, a new server restored from
the checkpoint, and a BC trainer on real Ray learns from the restored table through
`input: "replay://HOST:PORT/TABLE"`. Bad replay inputs fail with named errors."""
import glob

import numpy as np
import pytest

from tfrl import errors
from tfrl.agents.marwil import MARWILTFPolicy
from tfrl.registry import get_trainer_class
from tfrl.offline.input_reader import read_file
from tfrl.offline.replay_input import ReplayInput, parse_replay_input
from tfrl.rollout import RolloutWorker
from tfrl.rollout.replay_output import ReplayOutputSpec, replay_signature

# The linear CartPole controller of test_learning_from_recorded_experience: push right when
# 0.1 x + 0.5 x' + theta + theta' > 0; with no hidden layers the greedy policy is exactly it.
TEACHER = np.array([0.1, 0.5, 1.0, 1.0], np.float32)
LINEAR = {"fcnet_hiddens": []}
TABLE = "cartpole"


def teacher_weights(policy):
    kernel, bias, *value = policy.get_weights()
    kernel = np.zeros_like(kernel)
    kernel[:, 1] = 10.0 * TEACHER
    return [kernel, np.zeros_like(bias), *value]


def table(name, signature):
    from replay import Fifo, MinSize, Table, Uniform

    return Table(name, sampler=Uniform(), remover=Fifo(), max_size=10_000,
                 rate_limiter=MinSize(1), signature=signature)


@pytest.fixture(scope="module")
def restored_table(tmp_path_factory):
    """500 greedy teacher steps written into a table (and recorded to files), checkpointed, and a
    new server restored from the checkpoint: yields (its address, the recorded rows)."""
    from replay import Client, Server
    from replay.checkpoint import Checkpointer

    root = tmp_path_factory.mktemp("replay_input")
    worker = RolloutWorker("CartPole-v1", MARWILTFPolicy, config={
        "model": LINEAR, "rollout_fragment_length": 250, "explore": False, "seed": 5,
        "output": str(root / "files")})
    policy = worker.get_policy()
    policy.set_weights(teacher_weights(policy))
    checkpoints = Checkpointer(str(root / "checkpoints"))
    server = Server([table(TABLE, replay_signature(policy))], checkpointer=checkpoints)
    try:
        worker.set_replay_output(ReplayOutputSpec(f"127.0.0.1:{server.port}", TABLE))
        worker.sample()
        worker.sample()
        Client(f"127.0.0.1:{server.port}").checkpoint()
    finally:
        worker.stop()
        server.stop()
    recorded = [b for path in sorted(glob.glob(str(root / "files" / "*.tfrecord")))
                for b in read_file(path)]
    rows = {c: np.concatenate([b[c] for b in recorded]) for c in ("obs", "actions", "rewards")}
    assert len(rows["obs"]) == 500
    # a new server whose table comes from the checkpoint alone (declared empty, replaced on load)
    restored = Server([table(TABLE, None)], checkpointer=Checkpointer(str(root / "checkpoints")))
    yield f"127.0.0.1:{restored.port}", rows, restored
    restored.stop()


def test_bc_learns_from_a_table_restored_from_a_replay_checkpoint(ray_session, restored_table):
    address, rows, server = restored_table
    assert server.tables[TABLE].size == 500
    sampled_before = server.tables[TABLE].info().num_samples
    trainer = get_trainer_class("BC")(config={
        "env": "CartPole-v1", "input": f"replay://{address}/{TABLE}?batch_size=250",
        "model": LINEAR, "lr": 0.03, "train_batch_size": 500, "sgd_minibatch_size": 100,
        "num_sgd_iter": 20, "seed": 0})
    try:
        policy = trainer.get_policy()
        # start from all-zero weights: the greedy policy then always pushes left
        policy.set_weights([np.zeros_like(w) for w in policy.get_weights()])
        clear = np.abs(rows["obs"] @ TEACHER) > 0.05
        assert clear.sum() > 150
        before, _, _ = policy.compute_actions(rows["obs"][clear], explore=False)
        result = trainer.train()
        after, _, _ = policy.compute_actions(rows["obs"][clear], explore=False)
        # the worker's reader hands out rows of the table: each is a written row, columns intact
        batch = trainer.workers.local_worker().input_reader.next()
    finally:
        trainer.stop()
    assert result["info"]["num_steps_sampled"] == 500
    assert result["info"]["num_steps_trained"] >= 500
    assert result["episodes_this_iter"] == 0
    # 500 items sampled by training and 250 by the reader above, all from the restored table
    assert server.tables[TABLE].info().num_samples - sampled_before == 750
    assert batch.count == 250
    index = {row.tobytes(): i for i, row in enumerate(rows["obs"])}
    matches = [index.get(row.tobytes()) for row in batch["obs"]]
    assert None not in matches
    np.testing.assert_array_equal(batch["actions"], rows["actions"][matches])
    np.testing.assert_array_equal(batch["rewards"], rows["rewards"][matches])
    # the learner imitated the teacher's recorded actions
    teacher = rows["actions"][clear]
    assert np.mean(after == teacher) >= 0.9
    assert np.mean(before == teacher) < 0.7


def test_bad_replay_inputs_raise_named_errors(restored_table, free_port):
    from replay import Server

    address, _, _ = restored_table
    with pytest.raises(errors.ReplayInputUnreachableError, match="no replay server answers"):
        ReplayInput(parse_replay_input(f"replay://127.0.0.1:{free_port}/{TABLE}?timeout_s=5"))
    with pytest.raises(errors.InvalidReplayInputError, match=r"has no table 'other'.*'cartpole'"):
        ReplayInput(parse_replay_input({"replay": {"address": address, "table": "other"}}))
    with pytest.raises(errors.InvalidReplayInputError, match="unknown replay option"):
        parse_replay_input(f"replay://{address}/{TABLE}?batchsize=3")
    with pytest.raises(errors.InvalidReplayInputError, match="names no replay table"):
        parse_replay_input(f"replay://{address}/")
    from replay.specs import TensorSpec

    server = Server([
        table("unnamed", [TensorSpec((4,), np.float32)]),
        table("not_rows", {"pixels": TensorSpec((4,), np.float32)}),
        table("empty", {"obs": TensorSpec((4,), np.float32), "actions": TensorSpec((), np.int64)})])
    try:
        other = f"127.0.0.1:{server.port}"
        with pytest.raises(errors.InvalidReplayInputError, match="unnamed columns"):
            ReplayInput(parse_replay_input(f"replay://{other}/unnamed"))
        with pytest.raises(errors.InvalidReplayInputError, match=r"\['obs', 'actions'\] missing"):
            ReplayInput(parse_replay_input(f"replay://{other}/not_rows"))
        empty = ReplayInput(parse_replay_input(f"replay://{other}/empty?timeout_s=0.2"))
        with pytest.raises(errors.ReplayInputError, match="gave no sample within"):
            empty.next()
    finally:
        server.stop()
