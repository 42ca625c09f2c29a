"""The AlphaZero loop's components as Ray actors: self-play, candidate evaluator, learner.

Self-play actors play games with the weights they are given and write every position to the
replay table through a `TrajectoryWriter` (one item per position; the bulk data goes straight
to the replay server, never through the driver). The evaluator plays matches between two
players (the gate, and the final evaluation). The learner actor owns TensorFlow and a
MirroredStrategy over its logical CPU devices (or GPUs); the other actors run numpy only.
The actors reserve no CPU of Ray's: the loop is synchronous, so they take turns.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import ray

import replay
from examples.alphazero import network
from examples.alphazero.connect_four import ConnectFour
from examples.alphazero.play import play_match, self_play_game

TABLE = "games"


def games_table(game: ConnectFour, max_size: int) -> replay.Table:
    """The shared buffer: the last `max_size` positions, sampled uniformly."""
    return replay.Table(
        name=TABLE, sampler=replay.Uniform(), remover=replay.Fifo(), max_size=max_size,
        rate_limiter=replay.MinSize(1),
        signature={"observation": replay.TensorSpec(game.observation_shape, np.float32),
                   "policy": replay.TensorSpec((game.num_actions,), np.float32),
                   "outcome": replay.TensorSpec((), np.float32)})


@ray.remote(num_cpus=0)
class SelfPlayActor:
    def __init__(self, game: ConnectFour, address: str, seed: int):
        self.game = game
        self.writer = replay.Client(address).trajectory_writer(num_keep_alive_refs=1)
        self.rng = np.random.default_rng(seed)

    def play(self, weights: network.Weights, num_games: int, num_simulations: int) -> Dict[str, int]:
        """Plays `num_games` self-play games and writes their positions to the table; returns
        the counts of positions and of first-player wins, draws and losses."""
        counts = {"positions": 0, "first_player_wins": 0, "draws": 0, "first_player_losses": 0}
        for _ in range(num_games):
            samples, winner = self_play_game(self.game, weights, num_simulations, self.rng)
            for sample in samples:
                self.writer.create_item(TABLE, priority=1.0, trajectory=self.writer.append(sample))
            self.writer.end_episode()  # waits until the server holds the game's items
            counts["positions"] += len(samples)
            counts[{1: "first_player_wins", 0: "draws", -1: "first_player_losses"}[winner]] += 1
        return counts


@ray.remote(num_cpus=0)
class Evaluator:
    def __init__(self, game: ConnectFour, seed: int):
        self.game = game
        self.rng = np.random.default_rng(seed)

    def match(self, player: network.Weights, opponent: Optional[network.Weights], num_games: int,
              num_simulations: int) -> Dict[str, float]:
        """`play.play_match` of `player` against `opponent` (None: the random player)."""
        return play_match(self.game, player, opponent, num_games, num_simulations, self.rng)


@ray.remote(num_cpus=0)
class Learner:
    def __init__(self, address: str, weights: network.Weights, num_replicas: int = 2, **options):
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            try:  # one replica per logical CPU device, so the strategy mirrors even on a CPU
                tf.config.set_logical_device_configuration(
                    tf.config.list_physical_devices("CPU")[0],
                    [tf.config.LogicalDeviceConfiguration()] * num_replicas)
            except RuntimeError:
                pass  # TensorFlow already ran in this worker process; keep its devices
        from examples.alphazero.learner import AlphaZeroLearner

        self.learner = AlphaZeroLearner(address, TABLE, weights, **options)

    def num_replicas(self) -> int:
        return self.learner.num_replicas

    def train(self, num_steps: int) -> Dict[str, float]:
        return self.learner.train(num_steps)

    def get_weights(self) -> List[np.ndarray]:
        return self.learner.get_weights()

    def close(self) -> None:
        self.learner.close()
