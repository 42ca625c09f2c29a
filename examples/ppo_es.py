"""PPO-ES: an evolution-strategies loop whose population members are unmodified PPO trainers.

Each generation, every member starts from the population's weights plus an antithetic Gaussian
perturbation, trains a few PPO iterations (with its own Ray rollout workers and replay server),
and is scored by its mean episode return; the new population weights are the members' trained
weights averaged with centered-rank fitness weights (ES's shaping, tfrl/agents/es/fitness.py).
The loop only uses `train()` and `get_policy().get_weights()/set_weights()`: PPO does not know
it is nested. examples/a3c_es.py runs the same loop over A3C trainers. `evolve` also takes an
optional `on_generation` callback (added for tools/bench_ppo_es.py; without it nothing changes).

    python examples/ppo_es.py --population 4 --generations 10
"""
import argparse

import numpy as np
import ray

from tfrl.agents.es.fitness import compute_centered_ranks


def evolve(make_member, args, on_generation=None) -> list:
    """Runs the ES loop over members built by `make_member(seed, workers)`; returns the
    population's mean return per generation. `on_generation(generation, theta, scores, results)`,
    if given, is called after each generation with the new population weights, the members'
    scores and each member's last `train()` result."""
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    rng = np.random.default_rng(0)
    members = [make_member(seed, args.workers) for seed in range(args.population)]
    theta = members[0].get_policy().get_weights()
    history = []
    try:
        for generation in range(args.generations):
            half = [[args.sigma * rng.standard_normal(w.shape) for w in theta]
                    for _ in range((args.population + 1) // 2)]
            noises = (half + [[-e for e in eps] for eps in half])[:args.population]
            scores, trained, results = [], [], []
            for member, eps in zip(members, noises):
                member.get_policy().set_weights([w + e for w, e in zip(theta, eps)])
                member.workers.sync_weights()
                for _ in range(args.inner_iterations):
                    result = member.train()
                scores.append(np.nan_to_num(result["episode_reward_mean"], nan=0.0))
                trained.append(member.get_policy().get_weights())
                results.append(result)
            fitness = compute_centered_ranks(np.array(scores)) + 0.5  # in [0, 1]
            fitness = fitness / fitness.sum()
            theta = [sum(f * weights[i] for f, weights in zip(fitness, trained))
                     for i in range(len(theta))]
            history.append(float(np.mean(scores)))
            print(f"generation {generation}: returns {np.round(scores, 1).tolist()}", flush=True)
            if on_generation is not None:
                on_generation(generation, theta, scores, results)
    finally:
        for member in members:
            member.stop()
    return history


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--generations", "--iterations", type=int, default=10)
    parser.add_argument("--inner-iterations", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=1, help="rollout workers per member")
    return parser.parse_args(argv)


def make_ppo(seed: int, workers: int):
    from tfrl.agents.ppo.ppo import PPOTrainer

    return PPOTrainer(env="CartPole-v1", config={
        "num_workers": workers, "num_cpus_per_worker": 0, "rollout_fragment_length": 128,
        "train_batch_size": 256, "sgd_minibatch_size": 64, "num_sgd_iter": 4, "lr": 1e-3,
        "seed": seed, "model": {"fcnet_hiddens": [32, 32]}})


def main(argv=None) -> list:
    return evolve(make_ppo, parse_args(argv))


if __name__ == "__main__":
    main()
