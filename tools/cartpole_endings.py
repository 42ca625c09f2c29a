"""How a CartPole tuned example's episodes end while it learns: the pole falling, the cart
leaving the track, or the 500-step limit, seed by seed.

    python tools/cartpole_endings.py cartpole-dqn --seeds 1 2 3 [--every 10240] [--max-steps 150000]
        [--set td_error_loss_fn=mse ...]

Each seed trains the tuned example (with `seed` set) through the full path until its stop reward
or `--max-steps`; the env of every rollout worker is CartPole-v1 wrapped so that each finished
episode's return and ending go to a file. Prints, every `--every` env steps and at the end:

    seed=3 env_steps=40960 mean_return=151.8 last100_endings=angle:11,cart:89,limit:0 mean_q=49.9

`angle`: the pole passed 12 degrees; `cart`: the cart passed x = +-2.4; `limit`: truncated at 500
steps. `mean_q` is the learner's mean Q estimate where the algorithm reports one.
"""
import argparse
import collections
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CART_LIMIT = 2.4  # CartPole-v1's x_threshold


def endings_env(path: str):
    """An env creator: CartPole-v1 whose finished episodes are appended to `path` as
    `return ending` lines (workers in other processes append to the same file)."""
    def make(env_config):
        import gymnasium as gym

        class Endings(gym.Wrapper):
            def reset(self, **kwargs):
                self.episode_return = 0.0
                return self.env.reset(**kwargs)

            def step(self, action):
                obs, reward, terminated, truncated, info = self.env.step(action)
                self.episode_return += float(reward)
                if terminated or truncated:
                    ending = ("limit" if not terminated
                              else "cart" if abs(obs[0]) > CART_LIMIT else "angle")
                    with open(path, "a") as log:
                        log.write(f"{self.episode_return} {ending}\n")
                return obs, reward, terminated, truncated, info

        return Endings(gym.make("CartPole-v1"))

    return make


def last_episodes(path: str, count: int = 100) -> list:
    """The last `count` finished episodes an `endings_env` wrote to `path`, as (return, ending)."""
    with open(path) as log:
        rows = [line.split() for line in log.read().splitlines()[-count:]]
    return [(float(episode_return), ending) for episode_return, ending in rows]


def last_endings(path: str, count: int = 100) -> str:
    tally = collections.Counter(ending for _, ending in last_episodes(path, count))
    return ",".join(f"{name}:{tally[name]}" for name in ("angle", "cart", "limit"))


def run_seed(name: str, seed: int, every: int, max_steps: int, overrides: dict) -> None:
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file

    experiment = load_experiment_file(name)
    experiment["config"].update(overrides, seed=seed)
    target = experiment["stop"]["episode_reward_mean"]
    path = tempfile.NamedTemporaryFile("w", suffix=".endings", delete=False).name
    trainer = get_trainer_class(experiment["run"])(config=experiment["config"],
                                                    env=endings_env(path))
    next_report = every
    try:
        while True:
            result = trainer.train()
            steps, mean = result["timesteps_total"], result["episode_reward_mean"]
            done = mean >= target or steps >= max_steps
            if steps >= next_report or done:
                stats = result["info"].get("learner", {}).get("default_policy", {})
                print(f"seed={seed} env_steps={steps} mean_return={mean:.1f} "
                      f"last100_endings={last_endings(path)} "
                      f"mean_q={float(stats.get('mean_q', float('nan'))):.1f}"
                      f"{' REACHED' if mean >= target else ' STOPPED' if done else ''}", flush=True)
                next_report = steps + every
            if done:
                return
    finally:
        trainer.stop()
        os.unlink(path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a CartPole tuned example, e.g. cartpole-dqn")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--every", type=int, default=10240)
    parser.add_argument("--max-steps", type=int, default=150_000)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides, each value read as YAML")
    args = parser.parse_args(argv)
    import yaml

    from tfrl.runtime import ensure_ray

    overrides = {key: yaml.safe_load(value)
                 for key, _, value in (item.partition("=") for item in args.set)}

    ensure_ray({})
    for seed in args.seeds:
        run_seed(args.name, seed, args.every, args.max_steps, overrides)


if __name__ == "__main__":
    main()
