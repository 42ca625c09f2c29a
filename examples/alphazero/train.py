"""The AlphaZero loop: self-play actors, a shared replay table, a learner and a gating evaluator.

Every iteration the self-play actors play games with the best network so far and write them to
the replay table; the learner (MirroredStrategy, fed by ReplayDataset) takes gradient steps on
the table; the evaluator plays the learner's candidate against the best network and the
candidate becomes the best when it scores at least `--gate-threshold`. The driver only passes
weights and reads results; each component keeps its own parallelism (AlphaGo Zero's loop as
actors under one driver, the RLlib composition idea).

    python -m examples.alphazero.train --iterations 20 --games-per-iteration 40 --simulations 50 --evaluate
"""
import argparse
from typing import Dict, List, Optional

import numpy as np
import ray

import replay
from examples.alphazero import network
from examples.alphazero.actors import Evaluator, Learner, SelfPlayActor, games_table
from examples.alphazero.connect_four import ConnectFour
from examples.alphazero.evaluate import evaluate, match, save


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--iterations", type=int, default=20)
    add("--games-per-iteration", type=int, default=40)
    add("--simulations", type=int, default=50, help="MCTS simulations per move")
    add("--actors", type=int, default=2, help="self-play actors (and evaluators)")
    add("--train-steps", type=int, default=100, help="learner steps per iteration")
    add("--batch-size", type=int, default=128)
    add("--learning-rate", type=float, default=1e-3)
    add("--hidden", type=int, nargs="+", default=[128, 128])
    add("--buffer-size", type=int, default=20_000, help="positions the replay table keeps")
    add("--gate-games", type=int, default=20)
    add("--gate-threshold", type=float, default=0.55, help="score the candidate needs")
    add("--evaluate", action="store_true", help="finally play the best network against the "
        "random player and the initial network")
    add("--eval-games", type=int, default=50)
    add("--checkpoint", help="save the best and the initial network here (.npz) every iteration")
    add("--replay-address", help="a running replay server with the games table (default: embedded)")
    add("--ray-address", default="local", help="a Ray cluster to join (default: start one here)")
    add("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    game = ConnectFour()
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=args.ray_address, include_dashboard=False, log_to_driver=False)
    initial = network.initial_weights(int(np.prod(game.observation_shape)), game.num_actions,
                                      args.hidden, args.seed)
    server = None if args.replay_address else replay.Server([games_table(game, args.buffer_size)])
    address = args.replay_address or f"localhost:{server.port}"
    self_play = [SelfPlayActor.remote(game, address, args.seed + i) for i in range(args.actors)]
    evaluators = [Evaluator.remote(game, args.seed + 1000 + i) for i in range(args.actors)]
    learner = Learner.remote(address, initial, batch_size=args.batch_size,
                             learning_rate=args.learning_rate)
    best, history = initial, []
    try:
        for iteration in range(1, args.iterations + 1):
            best_ref = ray.put(best)
            games = [len(range(i, args.games_per_iteration, args.actors)) for i in range(args.actors)]
            counts = ray.get([actor.play.remote(best_ref, n, args.simulations)
                              for actor, n in zip(self_play, games) if n])
            losses = ray.get(learner.train.remote(args.train_steps))
            candidate = ray.get(learner.get_weights.remote())
            gate = match(evaluators, candidate, best_ref, args.gate_games, args.simulations)
            accepted = gate["score"] >= args.gate_threshold
            if accepted:
                best = candidate
            history.append({"iteration": iteration, "positions": sum(c["positions"] for c in counts),
                            **losses, "gate_score": gate["score"], "accepted": accepted})
            print(f"iteration {iteration}: {history[-1]['positions']} positions, policy loss "
                  f"{losses['policy_loss']:.3f}, value loss {losses['value_loss']:.3f}, candidate "
                  f"scores {gate['score']:.2f} against the best: {'accepted' if accepted else 'rejected'}",
                  flush=True)
            if args.checkpoint:
                save(args.checkpoint, best, initial)
        result = {"history": history, "best": best, "initial": initial,
                  "learner_replicas": ray.get(learner.num_replicas.remote())}
        if args.evaluate:
            result.update(evaluate(evaluators, best, initial, args.eval_games, args.simulations))
        return result
    finally:
        ray.get(learner.close.remote())
        for actor in [*self_play, *evaluators, learner]:
            ray.kill(actor)
        if server is not None:
            server.stop()
        if started_ray:
            ray.shutdown()


if __name__ == "__main__":
    main()
