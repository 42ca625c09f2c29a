"""Multi-agent: several policies acting in one shared env, each learning from its own replay table.

Two envs to choose from:

- `cartpoles`: two independent CartPoles stepped as one multi-agent env (`make_multi_agent`);
  agent 0 acts with policy "learner", agent 1 with policy "frozen", which is left out of
  `policies_to_train` and keeps its initial weights.
- `coins` (needs the `pettingzoo` extra): a PettingZoo parallel env, `CoinGuessing`, wrapped
  with `ParallelPettingZooEnv`; agents "left" and "right" each have their own policy and both
  learn. Any PettingZoo `parallel_env()` is used the same way.

    python examples/multi_agent.py --run PPO --env cartpoles --iterations 20
    python examples/multi_agent.py --run DQN --env coins --iterations 10

Each iteration prints the mean episode return of every policy (`policy_reward_mean`).
"""
import argparse

import gymnasium as gym
import numpy as np

from tfrl.registry import get_trainer_class
from tfrl.env import ParallelPettingZooEnv, make_multi_agent

try:
    from pettingzoo import ParallelEnv
except ImportError:  # without the pettingzoo extra only the "cartpoles" env runs
    ParallelEnv = object

TwoCartPoles = make_multi_agent("CartPole-v1", 2)


def cartpoles_multiagent(policies_to_train=("learner",)) -> dict:
    """The `multiagent` config of the "cartpoles" env: a spec (policy class, observation space,
    action space, config) per policy id; None takes the trainer's policy class and the spaces
    of the agents mapped to that policy."""
    return {
        "policies": {"learner": (None, None, None, {}), "frozen": (None, None, None, {})},
        "policy_mapping_fn": lambda agent_id: "learner" if agent_id == 0 else "frozen",
        "policies_to_train": list(policies_to_train),
    }


class CoinGuessing(ParallelEnv):
    """A PettingZoo parallel env: each step both agents see a coin (one-hot side); "left" is
    paid 1 for naming the side, "right" for naming the other side. "right" leaves after 3 steps;
    the episode is truncated after 6."""

    metadata = {"name": "coin_guessing_v0"}

    def __init__(self):
        self.possible_agents = ["left", "right"]
        self.agents = []
        self._rng = np.random.default_rng(0)

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def _flip(self):
        self.side = int(self._rng.integers(2))
        return np.eye(2, dtype=np.float32)[self.side]

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        coin = self._flip()
        return {a: coin for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        rewards = {"left": float(actions["left"] == self.side)}
        if "right" in actions:
            rewards["right"] = float(actions["right"] != self.side)
        terminateds = {a: a == "right" and self.t >= 3 for a in self.agents}
        truncateds = {a: self.t >= 6 for a in self.agents}
        coin = self._flip()
        observations = {a: coin for a in self.agents}
        self.agents = [a for a in self.agents if not (terminateds[a] or truncateds[a])]
        return observations, rewards, terminateds, truncateds, {a: {} for a in observations}


def make_coins(env_config=None):
    return ParallelPettingZooEnv(CoinGuessing())


def coins_multiagent() -> dict:
    return {"policies": {"left": (None, None, None, {}), "right": (None, None, None, {})},
            "policy_mapping_fn": lambda agent_id: agent_id}


ENVS = {"cartpoles": (TwoCartPoles, cartpoles_multiagent), "coins": (make_coins, coins_multiagent)}


def main(run: str = "PPO", env: str = "cartpoles", iterations: int = 10, config=None,
         verbose: bool = True) -> list:
    """Trains `run` on `env` for `iterations` iterations; returns the result dicts."""
    env_creator, multiagent = ENVS[env]
    trainer = get_trainer_class(run)(env=env_creator,
                                     config=dict(config or {}, multiagent=multiagent()))
    results = []
    try:
        for _ in range(iterations):
            result = trainer.train()
            results.append(result)
            if verbose:
                returns = ", ".join(f"{pid} {value:.2f}"
                                    for pid, value in sorted(result["policy_reward_mean"].items()))
                print(f"iteration {result['training_iteration']}: {returns}")
    finally:
        trainer.stop()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="PPO", choices=["PG", "A2C", "A3C", "PPO", "DQN"])
    parser.add_argument("--env", default="cartpoles", choices=sorted(ENVS))
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--num-workers", type=int, default=1)
    args = parser.parse_args()
    main(args.run, args.env, args.iterations, {"num_workers": args.num_workers})
