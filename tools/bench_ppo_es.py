"""PPO-ES against plain PPO on CartPole-v1 for the same env-step budget, both curves printed.

PPO-ES is examples/ppo_es.py's own `evolve` over its `make_ppo` members (P members, G
generations of I PPO iterations each); its env steps are the sum over members of their
`timesteps_total`, and after each generation it prints one `curve algo=ppo_es ...` line whose
mean_return is the mean of the members' scores (each member's `episode_reward_mean`: its last
100 episodes, which can span earlier generations' perturbed weights). Then one plain PPO
trainer, `make_ppo(seed=0, workers)`, trains until it has used at least as many env steps,
printing one `curve algo=ppo ...` line per iteration (mean_return = `episode_reward_mean`).
seconds count from just before the members (or the trainer) are built.

The `result` line gives ppo_es_final_mean, the mean of the last generation's scores (as the
example reports it), and ppo_final_mean, PPO's last `episode_reward_mean`. Since evolve's
`on_generation` callback hands over the population weights theta, it also gives
ppo_es_theta_eval_mean and ppo_eval_mean: the final theta and PPO's final weights, each played
for --eval-episodes episodes (sampled actions, the same env seeds for both); these evaluation
steps are not counted in either budget.

    python tools/bench_ppo_es.py --population 4 --generations 15 --inner-iterations 1
"""
import argparse
import importlib.util
import os
import time

import gymnasium as gym
import numpy as np

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "ppo_es.py")


def load_example():
    spec = importlib.util.spec_from_file_location("example_ppo_es", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def play(trainer, episodes: int) -> float:
    """Mean return of `episodes` CartPole-v1 episodes with the trainer's current weights."""
    env = gym.make("CartPole-v1")
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        done, total = False, 0.0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(trainer.compute_action(obs, explore=True)))
            total += reward
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--generations", type=int, default=15)
    parser.add_argument("--inner-iterations", type=int, default=1)
    parser.add_argument("--sigma", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=1, help="rollout workers per trainer")
    parser.add_argument("--eval-episodes", type=int, default=20)
    args = parser.parse_args(argv)
    example = load_example()
    es_args = example.parse_args([
        "--population", str(args.population), "--generations", str(args.generations),
        "--inner-iterations", str(args.inner_iterations), "--sigma", str(args.sigma),
        "--workers", str(args.workers)])

    state = {"theta": None, "steps": 0}
    start = time.time()

    def on_generation(generation, theta, scores, results):
        state["theta"], state["steps"] = theta, sum(int(r["timesteps_total"]) for r in results)
        print(f"curve algo=ppo_es generation={generation} env_steps={state['steps']} "
              f"mean_return={np.mean(scores):.1f} seconds={time.time() - start:.1f}", flush=True)

    history = example.evolve(example.make_ppo, es_args, on_generation=on_generation)
    es_steps, es_final = state["steps"], history[-1]

    evaluator = example.make_ppo(0, 0)
    try:
        evaluator.get_policy().set_weights(state["theta"])
        es_theta_eval = play(evaluator, args.eval_episodes)
    finally:
        evaluator.stop()

    start = time.time()
    trainer = example.make_ppo(0, args.workers)
    try:
        steps, iteration, final = 0, 0, float("nan")
        while steps < es_steps:
            result = trainer.train()
            steps, final = int(result["timesteps_total"]), float(result["episode_reward_mean"])
            print(f"curve algo=ppo iteration={iteration} env_steps={steps} mean_return={final:.1f} "
                  f"seconds={time.time() - start:.1f}", flush=True)
            iteration += 1
        ppo_eval = play(trainer, args.eval_episodes)
    finally:
        trainer.stop()
    print(f"result ppo_es_env_steps={es_steps} ppo_es_final_mean={es_final:.1f} ppo_env_steps={steps} "
          f"ppo_final_mean={final:.1f} ppo_es_theta_eval_mean={es_theta_eval:.1f} "
          f"ppo_eval_mean={ppo_eval:.1f} eval_episodes={args.eval_episodes}", flush=True)


if __name__ == "__main__":
    main()
