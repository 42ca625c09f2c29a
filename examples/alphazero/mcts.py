"""Monte Carlo tree search with PUCT, guided by a policy+value evaluator (AlphaZero's search).

`search(state, evaluate, num_simulations)` returns the visit distribution over moves at the
root. Each simulation walks down by PUCT (Q + c_puct * P * sqrt(N_parent) / (1 + N)), asks the
evaluator for the priors and value of the leaf (a finished game scores exactly), and backs the
value up, flipping its sign at every ply. Self-play adds Dirichlet noise to the root priors so
that every move keeps being tried. `evaluate(state) -> (priors over moves, value)` is
`network.evaluator(weights)` in the actors.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import numpy as np

Evaluate = Callable[[object], Tuple[np.ndarray, float]]


class Node:
    """Statistics of the moves out of one position, from the side of its player to move."""

    __slots__ = ("state", "priors", "visits", "value_sums", "children")

    def __init__(self, state, priors: np.ndarray):
        self.state = state
        self.priors = priors
        self.visits = np.zeros(len(priors))
        self.value_sums = np.zeros(len(priors))
        self.children: Dict[int, "Node"] = {}


def _leaf_value(state, evaluate: Evaluate):
    """(node or None, value for the player to move at `state`)."""
    if state.is_terminal:
        # The player who just moved won (or drew): the player to move has lost.
        return None, -1.0 if state.winner else 0.0
    priors, value = evaluate(state)
    return Node(state, np.asarray(priors, np.float64)), float(value)


def search(state, evaluate: Evaluate, num_simulations: int, c_puct: float = 1.5,
           dirichlet_alpha: float = 0.5, noise_fraction: float = 0.25,
           rng: Optional[np.random.Generator] = None) -> np.ndarray:
    """The root's visit counts normalised to a distribution over moves (zero on illegal ones).

    With `rng`, Dirichlet(`dirichlet_alpha`) noise is mixed into the root priors with weight
    `noise_fraction` (self-play); without it the search is deterministic (evaluation).

    Raises:
      ValueError: `state` is a finished game, or `num_simulations` < 1.
    """
    if state.is_terminal:
        raise ValueError("search needs a position with legal moves; the game has ended")
    if num_simulations < 1:
        raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
    root, _ = _leaf_value(state, evaluate)
    legal = state.legal_mask()
    if rng is not None:
        noise = np.zeros(len(legal))
        noise[legal] = rng.dirichlet([dirichlet_alpha] * int(legal.sum()))
        root.priors = (1 - noise_fraction) * root.priors + noise_fraction * noise
    for _ in range(num_simulations):
        node, path = root, []
        while True:
            moves = node.state.legal_mask()
            q = np.divide(node.value_sums, node.visits, out=np.zeros_like(node.value_sums),
                          where=node.visits > 0)
            u = c_puct * node.priors * np.sqrt(node.visits.sum() + 1) / (1 + node.visits)
            move = int(np.argmax(np.where(moves, q + u, -np.inf)))
            path.append((node, move))
            child = node.children.get(move)
            if child is None:
                break
            node = child
        next_state = node.state.play(move)
        child, value = _leaf_value(next_state, evaluate)
        if child is not None:
            node.children[move] = child
        for parent, move in reversed(path):
            value = -value  # the parent's player moved into a position valued for the opponent
            parent.visits[move] += 1
            parent.value_sums[move] += value
    return root.visits / root.visits.sum()
