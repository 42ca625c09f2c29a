"""Benchmark of rollout throughput: env steps/s on CartPole-v1 (tfrl/rollout).

Cases: the bare gymnasium env stepping with random actions (the ceiling), then RolloutWorkers
as Ray actors with a 64x64 fully connected policy (built with build_tf_policy) for 1 and 2
workers with 1 and 8 envs each, sampling postprocessed fragments (actions, values, GAE) and
returning them to the driver. One line per case.

    python tools/bench_rollouts.py [--seconds 5] [--fragment 200]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def bare_env_rate(seconds: float) -> float:
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        steps += 1000
    return steps / (time.perf_counter() - start)


def make_policy_class():
    import tensorflow as tf

    from tfrl.policy import SampleBatch, build_tf_policy, compute_gae_for_sample_batch

    def pg_loss(policy, model, dist_class, train_batch):
        logits, _ = model({SampleBatch.OBS: train_batch[SampleBatch.OBS]}, None, None)
        logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
        return -tf.reduce_mean(logp * train_batch[SampleBatch.ADVANTAGES])

    return build_tf_policy("BenchPG", loss_fn=pg_loss, postprocess_fn=compute_gae_for_sample_batch,
                           get_default_config=lambda: {"model": {"fcnet_hiddens": [64, 64]}})


def worker_rate(num_workers: int, num_envs: int, fragment: int, seconds: float) -> float:
    from tfrl.rollout import WorkerSet

    config = {"num_envs_per_worker": num_envs, "rollout_fragment_length": fragment,
              "num_cpus_per_worker": 1, "tf_threads_per_worker": 1}
    workers = WorkerSet("CartPole-v1", make_policy_class(), config, num_workers=num_workers)
    try:
        workers.call_remote_workers("sample")  # warm up: traces the tf.functions
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += sum(b.count for b in workers.call_remote_workers("sample"))
        return steps / (time.perf_counter() - start)
    finally:
        workers.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per case")
    parser.add_argument("--fragment", type=int, default=200, help="rollout_fragment_length")
    args = parser.parse_args()
    print(f"bare gymnasium CartPole-v1, random actions (ceiling): "
          f"{bare_env_rate(args.seconds):,.0f} env steps/s", flush=True)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        for num_workers in (1, 2):
            for num_envs in (1, 8):
                rate = worker_rate(num_workers, num_envs, args.fragment, args.seconds)
                print(f"rollout workers={num_workers} envs_per_worker={num_envs} policy=fc64x64: "
                      f"{rate:,.0f} env steps/s", flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
