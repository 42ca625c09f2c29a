"""examples/alphazero/train.py: a few iterations of the whole loop on a real replay server and
real Ray actors fill the games table with well-formed samples and record the gate's decisions."""
import numpy as np
import pytest

import replay
from examples.alphazero import evaluate, train
from examples.alphazero.actors import TABLE, games_table
from examples.alphazero.connect_four import ConnectFour

TINY = ["--iterations", "2", "--games-per-iteration", "4", "--simulations", "8", "--actors", "2",
        "--train-steps", "3", "--batch-size", "16", "--gate-games", "2", "--hidden", "16",
        "--evaluate", "--eval-games", "2"]


@pytest.mark.timeout(180)
def test_a_few_iterations_fill_the_table_and_gate_the_candidates(ray_session, tmp_path):
    game = ConnectFour()
    checkpoint = str(tmp_path / "az.npz")
    with replay.Server([games_table(game, max_size=10_000)]) as server:
        address = f"localhost:{server.port}"
        # Threshold 0: every candidate passes the gate, so the best network is the learner's.
        result = train.main(TINY + ["--replay-address", address, "--gate-threshold", "0",
                                    "--checkpoint", checkpoint])
        history = result["history"]
        positions = sum(entry["positions"] for entry in history)
        client = replay.Client(address)
        assert client.server_info()[TABLE].current_size == positions
        samples = list(client.sample(TABLE, num_samples=64, emit_timesteps=False, unpack_as_table_signature=True))

    # Each game has 7 to 30 positions: 8 games over the two iterations.
    assert 8 * 7 <= positions <= 8 * 30
    for sample in samples:
        obs, policy, outcome = sample.data["observation"], sample.data["policy"], sample.data["outcome"]
        assert obs.shape == (2, 5, 6) and obs.dtype == np.float32
        assert set(np.unique(obs)) <= {0.0, 1.0} and not (obs[0] * obs[1]).any()
        assert obs[1].sum() - obs[0].sum() in (0, 1)  # the player to move has as many or one fewer
        assert policy.shape == (6,) and np.isclose(policy.sum(), 1.0, atol=1e-5)
        assert (policy >= 0).all()
        full_columns = (obs.sum(axis=0)[0] > 0)
        assert (policy[full_columns] == 0).all()  # no visits to full columns
        assert outcome in (-1.0, 0.0, 1.0)

    assert [entry["iteration"] for entry in history] == [1, 2]
    assert all(entry["accepted"] and 0 <= entry["gate_score"] <= 1 for entry in history)
    assert result["learner_replicas"] == 2  # MirroredStrategy over two logical CPU devices
    changed = [not np.array_equal(b, i) for b, i in zip(result["best"], result["initial"])]
    assert all(changed)  # the accepted candidates carry the learner's updates
    for name in ("random", "initial"):
        outcome = result[f"vs_{name}"]
        assert outcome["wins"] + outcome["draws"] + outcome["losses"] == 2
    best, initial = evaluate.load(checkpoint)
    for saved, kept in zip(best + initial, result["best"] + result["initial"]):
        np.testing.assert_array_equal(saved, kept)


def test_a_checkpoint_without_networks_is_refused(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, something=np.zeros(3))
    with pytest.raises(ValueError, match="holds no networks"):
        evaluate.load(str(path))
