"""Evaluates a trained network: matches against the random player and the initial network.

`python -m examples.alphazero.train --checkpoint az.npz` saves the best network (and the initial
one) after every iteration; this script plays them, split over evaluator actors:

    python -m examples.alphazero.evaluate az.npz --games 50 --simulations 50
"""
import argparse
from typing import Dict, List, Optional

import numpy as np
import ray

from examples.alphazero import network
from examples.alphazero.actors import Evaluator
from examples.alphazero.connect_four import ConnectFour


def save(path: str, best: network.Weights, initial: network.Weights) -> None:
    np.savez(path, **{f"best_{i}": w for i, w in enumerate(best)},
             **{f"initial_{i}": w for i, w in enumerate(initial)})


def load(path: str):
    """(best, initial) weights from `save`. Only arrays are read (no pickles).

    Raises:
      ValueError: the file holds no saved networks.
    """
    with np.load(path, allow_pickle=False) as arrays:
        best = [arrays[f"best_{i}"] for i in range(sum(k.startswith("best_") for k in arrays))]
        initial = [arrays[f"initial_{i}"] for i in range(sum(k.startswith("initial_") for k in arrays))]
    if not best or len(best) != len(initial):
        raise ValueError(f"{path} holds no networks saved by examples.alphazero.train --checkpoint")
    return best, initial


def match(evaluators, player, opponent, num_games: int, simulations: int) -> Dict[str, float]:
    """A match split over the evaluator actors (an even number of games each, so each side
    moves first equally often); the summed wins, draws and losses, and the score."""
    shares = [2 * (num_games // 2 // len(evaluators))] * len(evaluators)
    shares[0] += num_games - sum(shares)
    results = ray.get([e.match.remote(player, opponent, n, simulations)
                       for e, n in zip(evaluators, shares) if n])
    total = {key: sum(r[key] for r in results) for key in ("wins", "draws", "losses")}
    return {**total, "score": (total["wins"] + total["draws"] / 2) / num_games}


def evaluate(evaluators, best, initial, num_games: int, simulations: int) -> Dict[str, Dict]:
    """The best network against the random player and against the initial network; prints both."""
    results = {}
    for name, opponent in (("random", None), ("initial", initial)):
        results[f"vs_{name}"] = outcome = match(evaluators, best, opponent, num_games, simulations)
        print(f"best network vs the {name} player over {num_games} games ({simulations} "
              f"simulations a move): {outcome['wins']} wins, {outcome['draws']} draws, "
              f"{outcome['losses']} losses", flush=True)
    return results


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--games", type=int, default=50)
    parser.add_argument("--simulations", type=int, default=50)
    parser.add_argument("--evaluators", type=int, default=2)
    parser.add_argument("--ray-address", default="local",
                        help="a Ray cluster to join (default: start one here)")
    args = parser.parse_args(argv)
    best, initial = load(args.checkpoint)
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    evaluators = [Evaluator.remote(ConnectFour(), seed) for seed in range(args.evaluators)]
    try:
        return evaluate(evaluators, best, initial, args.games, args.simulations)
    finally:
        for actor in evaluators:
            ray.kill(actor)
        if started_ray:
            ray.shutdown()


if __name__ == "__main__":
    main()
