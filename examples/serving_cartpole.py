"""PPO trained by an application that owns CartPole, through the serving bridge (tfrl.serving).

The trainer hosts a PolicyServer as its env; the application is a plain Python loop that steps
its own CartPole and asks a PolicyClient for actions (RLlib classic's cartpole_server.py and
cartpole_client.py in one file):

    python examples/serving_cartpole.py server --port 9900 [--token T]   # the trainer
    python examples/serving_cartpole.py client --port 9900 [--token T] [--inference-mode local]
    python examples/serving_cartpole.py both [--stop-reward 150]        # both, the client in a
                                                                        # process of its own
"""
import argparse
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gymnasium as gym  # noqa: E402

PPO_CONFIG = {"num_workers": 0, "train_batch_size": 1000, "rollout_fragment_length": 200,
              "sgd_minibatch_size": 128, "num_sgd_iter": 10, "lr": 1e-3}


def run_client(address: str, token=None, inference_mode: str = "remote", episodes=None) -> list:
    """The application: plays CartPole, asking the trainer for every action; returns the
    returns of its episodes (runs forever when `episodes` is None)."""
    from tfrl.errors import PolicyServerError
    from tfrl.serving import PolicyClient

    env = gym.make("CartPole-v1")
    returns = []
    try:
        with PolicyClient(address, inference_mode=inference_mode, token=token) as client:
            play(env, client, returns, episodes)
    except PolicyServerError as exc:
        if exc.code != "UNAVAILABLE":
            raise
        print("the policy server has stopped", flush=True)
    return returns


def play(env, client, returns: list, episodes=None) -> None:
    """Plays episodes of `env` with actions from `client`, appending their returns."""
    while episodes is None or len(returns) < episodes:
        episode_id = client.start_episode()
        obs, _ = env.reset()
        total = 0.0
        while True:
            action = client.get_action(episode_id, obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            client.log_returns(episode_id, reward)
            total += reward
            if terminated or truncated:
                client.end_episode(episode_id, obs, truncated=truncated and not terminated)
                break
        returns.append(total)


def make_trainer(port: int, token=None):
    """A PPO trainer whose env is a PolicyServer on `port` (0: a free port)."""
    from tfrl.agents.ppo.ppo import PPOTrainer
    from tfrl.serving import PolicyServer

    spaces = gym.make("CartPole-v1")
    return PPOTrainer(env=lambda ctx: PolicyServer(spaces.observation_space, spaces.action_space,
                                                   port=port, token=token),
                      config=PPO_CONFIG)


def serve(port: int, token=None, stop_reward: float = 450.0, max_iterations: int = 200,
          started=None) -> dict:
    """Trains until the mean return reaches `stop_reward`; returns the last result."""
    from tfrl.runtime import ensure_ray

    ensure_ray({})
    trainer = make_trainer(port, token)
    if started is not None:
        started(trainer.workers.local_worker().env.address)
    try:
        for _ in range(max_iterations):
            result = trainer.train()
            print(f"iteration {result['training_iteration']}: mean return "
                  f"{result['episode_reward_mean']:.1f}, env steps {result['timesteps_total']}",
                  flush=True)
            if result["episode_reward_mean"] >= stop_reward:
                break
        return result
    finally:
        trainer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["server", "client", "both"])
    parser.add_argument("--port", type=int, default=9900)
    parser.add_argument("--token", default=None)
    parser.add_argument("--inference-mode", choices=["remote", "local"], default="remote")
    parser.add_argument("--stop-reward", type=float, default=450.0)
    args = parser.parse_args()
    if args.role == "client":
        run_client(f"localhost:{args.port}", args.token, args.inference_mode)
    elif args.role == "server":
        serve(args.port, args.token, args.stop_reward)
    else:
        def start_client(address):
            client = multiprocessing.get_context("spawn").Process(
                target=run_client, args=(address, args.token, args.inference_mode), daemon=True)
            client.start()

        serve(0, args.token, args.stop_reward, started=start_client)


if __name__ == "__main__":
    main()
