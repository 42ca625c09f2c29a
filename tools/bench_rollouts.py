"""Benchmark of rollout throughput: env steps/s on CartPole-v1 against the bare env (tfrl/rollout).

Cases: one RolloutWorker with a 64x64 fully connected policy (built with build_tf_policy)
sampling postprocessed fragments (actions, values, GAE) with 8 and 32 envs, in-process ("local")
and as a Ray actor returning its fragments to the driver ("ray"). One line per case, each with
its fraction of the bare env's steps/s (gymnasium CartPole-v1 stepping with random actions, the
ceiling), measured in the same run right before and after the case.

    python tools/bench_rollouts.py [--seconds 5] [--fragment 200] [--envs 8 32] [--modes local ray]
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


def _config(num_envs: int, fragment: int) -> dict:
    return {"num_envs_per_worker": num_envs, "rollout_fragment_length": fragment,
            "num_cpus_per_worker": 1, "tf_threads_per_worker": 1}


def _measure(sample, seconds: float) -> float:
    sample()  # warm up: traces the tf.functions
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += sample()
    return steps / (time.perf_counter() - start)


def local_worker_rate(num_envs: int, fragment: int, seconds: float) -> float:
    """One RolloutWorker in this process (no Ray)."""
    from tfrl.rollout import RolloutWorker

    worker = RolloutWorker("CartPole-v1", make_policy_class(), _config(num_envs, fragment))
    return _measure(lambda: worker.sample().count, seconds)


def ray_worker_rate(num_envs: int, fragment: int, seconds: float) -> float:
    """One RolloutWorker as a Ray actor; its fragments travel to the driver."""
    from tfrl.rollout import WorkerSet

    workers = WorkerSet("CartPole-v1", make_policy_class(), _config(num_envs, fragment),
                        num_workers=1)
    try:
        return _measure(lambda: sum(b.count for b in workers.call_remote_workers("sample")),
                        seconds)
    finally:
        workers.stop()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per case")
    parser.add_argument("--fragment", type=int, default=200, help="rollout_fragment_length")
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 32], help="envs per worker")
    parser.add_argument("--modes", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    args = parser.parse_args(argv)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rates = {"local": local_worker_rate, "ray": ray_worker_rate}
    for mode in args.modes:
        if mode == "ray":  # started only now: Ray's own processes would slow the local cases
            import ray

            if not ray.is_initialized():
                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        try:
            for num_envs in args.envs:
                # the machine's load drifts: the bare env is measured right before and after
                before = bare_env_rate(args.seconds)
                rate = rates[mode](num_envs, args.fragment, args.seconds)
                bare = (before + bare_env_rate(args.seconds)) / 2
                print(f"rollout worker={mode} envs={num_envs} fragment={args.fragment} "
                      f"policy=fc64x64: {rate:,.0f} env steps/s bare_env={bare:,.0f} "
                      f"fraction_of_bare_env={rate / bare:.3f}", flush=True)
        finally:
            if mode == "ray":
                ray.shutdown()


if __name__ == "__main__":
    main()
