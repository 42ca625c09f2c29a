"""Playing whole games: self-play that records training samples, and matches between players.

A player is a network's weights (it moves by MCTS over that network) or None (a uniformly
random player). Self-play (AlphaZero's data) plays the first `temperature_moves` plies by
sampling from the visit distribution and the rest by its argmax; matches open the same way so
that evaluation games differ from one another.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from examples.alphazero import mcts, network
from examples.alphazero.connect_four import ConnectFour

Sample = Dict[str, np.ndarray]


def _choose(visits: np.ndarray, ply: int, temperature_moves: int, rng: np.random.Generator) -> int:
    if ply < temperature_moves:
        return int(rng.choice(len(visits), p=visits))
    return int(np.argmax(visits))


def self_play_game(game: ConnectFour, weights: network.Weights, num_simulations: int,
                   rng: np.random.Generator, temperature_moves: int = 8) -> Tuple[List[Sample], int]:
    """One game of the network against itself with root noise.

    Returns the samples, one per position ({"observation", "policy": visit distribution,
    "outcome": +1/0/-1 for the player to move there}), and the winner (1, -1 or 0).
    """
    evaluate = network.evaluator(weights)
    state, positions = game.new_game(), []
    while not state.is_terminal:
        visits = mcts.search(state, evaluate, num_simulations, rng=rng)
        positions.append((state.observation(), visits.astype(np.float32), state.to_play))
        state = state.play(_choose(visits, state.num_moves, temperature_moves, rng))
    samples = [{"observation": obs, "policy": policy,
                "outcome": np.float32(state.winner * to_play)} for obs, policy, to_play in positions]
    return samples, int(state.winner)


def play_game(game: ConnectFour, first: Optional[network.Weights], second: Optional[network.Weights],
              num_simulations: int, rng: np.random.Generator, temperature_moves: int = 2) -> int:
    """One game between two players (weights or None for random); returns the winner (1 = first)."""
    players = {1: first, -1: second}
    evaluators = {side: network.evaluator(w) for side, w in players.items() if w is not None}
    state = game.new_game()
    while not state.is_terminal:
        if players[state.to_play] is None:
            move = int(rng.choice(state.legal_moves()))
        else:
            visits = mcts.search(state, evaluators[state.to_play], num_simulations)
            move = _choose(visits, state.num_moves, temperature_moves, rng)
        state = state.play(move)
    return int(state.winner)


def play_match(game: ConnectFour, player: Optional[network.Weights], opponent: Optional[network.Weights],
               num_games: int, num_simulations: int, rng: np.random.Generator) -> Dict[str, float]:
    """`num_games` games, `player` moving first in every other one. Returns its wins, draws,
    losses and score ((wins + draws / 2) / games)."""
    wins = draws = 0
    for index in range(num_games):
        if index % 2 == 0:
            result = play_game(game, player, opponent, num_simulations, rng)
        else:
            result = -play_game(game, opponent, player, num_simulations, rng)
        wins += result == 1
        draws += result == 0
    return {"wins": wins, "draws": draws, "losses": num_games - wins - draws,
            "score": (wins + 0.5 * draws) / num_games}
