"""Nesting: trainers used, unchanged, as components inside another optimisation loop.

A tiny population-based training (PBT) loop: a population of PPO trainers with different
learning rates trains side by side (each with its own Ray rollout workers and replay server);
every few iterations the worst member copies the weights of the best and perturbs its learning
rate. The outer loop only calls `train()`, `get_policy().get_weights()/set_weights()` and reads
results: the trainers do not know they are nested (the RLlib composition idea; Ray Tune's PBT
scheduler does the same at cluster scale, see tfrl/tune.py).

    python examples/nested_trainers.py --population 2 --iterations 20
"""
import argparse

import numpy as np
import ray

from tfrl.agents.ppo.ppo import PPOTrainer
from tfrl.utils import make_schedule


def make_member(lr: float, seed: int) -> PPOTrainer:
    return PPOTrainer(env="CartPole-v1", config={
        "num_workers": 1, "num_envs_per_worker": 4, "num_cpus_per_worker": 0,
        "rollout_fragment_length": 32, "train_batch_size": 128, "sgd_minibatch_size": 64,
        "num_sgd_iter": 8, "lr": lr, "gamma": 0.98, "lambda": 0.8, "seed": seed,
        "model": {"fcnet_hiddens": [64, 64]}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--exploit-every", type=int, default=5)
    args = parser.parse_args()

    ray.init(include_dashboard=False, log_to_driver=False)
    rng = np.random.default_rng(0)
    lrs = [float(lr) for lr in np.geomspace(3e-4, 3e-3, args.population)]
    members = [make_member(lr, seed) for seed, lr in enumerate(lrs)]
    try:
        for iteration in range(1, args.iterations + 1):
            returns = [m.train()["episode_reward_mean"] for m in members]
            print(f"iteration {iteration}: " + "  ".join(
                f"lr={lr:.1e} return={r:.1f}" for lr, r in zip(lrs, returns)))
            if iteration % args.exploit_every == 0 and len(members) > 1:
                best, worst = int(np.nanargmax(returns)), int(np.nanargmin(returns))
                if best != worst:
                    weights = members[best].get_policy().get_weights()
                    members[worst].get_policy().set_weights(weights)
                    members[worst].workers.sync_weights()
                    lrs[worst] = lrs[best] * float(rng.choice([0.8, 1.25]))
                    policy = members[worst].get_policy()
                    policy.lr_schedule = make_schedule(lrs[worst], None)  # read at every update
                    print(f"  member {worst} copies member {best}; new lr {lrs[worst]:.1e}")
    finally:
        for m in members:
            m.stop()


if __name__ == "__main__":
    main()
