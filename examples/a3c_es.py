"""A3C-ES: the ES loop of examples/ppo_es.py over unmodified A3C trainers (asynchronous
gradients from each member's own Ray rollout workers).

    python examples/a3c_es.py --population 4 --generations 10
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ppo_es import evolve, parse_args  # noqa: E402


def make_a3c(seed: int, workers: int):
    from tfrl.agents.a3c.a3c import A3CTrainer

    return A3CTrainer(env="CartPole-v1", config={
        "num_workers": max(1, workers), "num_cpus_per_worker": 0, "rollout_fragment_length": 20,
        "grads_per_step": 10, "min_iter_time_s": 0, "timesteps_per_iteration": 200, "lr": 1e-3,
        "seed": seed, "model": {"fcnet_hiddens": [32, 32]}})


def main(argv=None) -> list:
    return evolve(make_a3c, parse_args(argv))


if __name__ == "__main__":
    main()
