"""Replay in a nutshell: a server with a prioritized table, a writer that stores CartPole steps
as overlapping 3-step trajectories, a sampler, and a priority update.

    python examples/replay_demo.py
"""
import gymnasium as gym
import numpy as np

import replay


def main(num_steps: int = 200) -> None:
    table = replay.Table(
        name="trajectories",
        sampler=replay.Prioritized(priority_exponent=0.8),
        remover=replay.Fifo(),
        max_size=10_000,
        rate_limiter=replay.MinSize(10),
        # The signature gives samples their structure (without one they are flat lists).
        signature={"obs": replay.TensorSpec((3, 4), np.float32),
                   "action": replay.TensorSpec((3,), np.int64)},
    )
    with replay.Server([table]) as server:
        client = replay.Client(f"localhost:{server.port}")
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=0)
        with client.writer(max_sequence_length=3) as writer:
            for step in range(num_steps):
                action = env.action_space.sample()
                writer.append({"obs": obs.astype(np.float32), "action": np.int64(action)})
                if step >= 2:  # every step starts a new overlapping trajectory; chunks are shared
                    writer.create_item("trajectories", num_timesteps=3, priority=1.0 + step % 5)
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    obs, _ = env.reset()
        info = client.server_info()["trajectories"]
        print(f"server on port {server.port}: table size {info.current_size}, inserts {info.num_inserts}")
        samples = list(client.sample("trajectories", num_samples=4,
                                     emit_timesteps=False, unpack_as_table_signature=True))
        for sample in samples:
            print(f"key {sample.info.key} p={sample.info.probability:.4f} "
                  f"obs {sample.data['obs'].shape} actions {sample.data['action'].tolist()}")
        client.mutate_priorities("trajectories", updates={samples[0].info.key: 50.0})
        print(f"priority of {samples[0].info.key} raised to 50; "
              f"server info: {client.server_info()['trajectories'].current_size} items")


if __name__ == "__main__":
    main()
