"""Benchmark of the policy optimizer strategies: env steps sampled and trained per second on
CartPole with 2 rollout workers, one line per case (PPO: multi_device, sync_samples,
allreduce; A3C: async_gradients, sharded_ps with 1, 2 and 4 shards, allreduce).

    python tools/bench_optimizers.py [--seconds 20] [--cases a3c_sharded_ps_2,ppo_allreduce]

Each case builds a trainer, runs one warm-up iteration (actor start, tracing), then trains for
`--seconds` and prints the rates over that time. The machine's load average is printed first.
"""
from __future__ import annotations

import argparse
import os
import time

SMALL = {"num_workers": 2, "num_cpus_per_worker": 0, "model": {"fcnet_hiddens": [64, 64]},
         "min_iter_time_s": 0}
PPO = dict(SMALL, train_batch_size=400, sgd_minibatch_size=100, num_sgd_iter=4,
           rollout_fragment_length=200)
A3C = dict(SMALL, rollout_fragment_length=10, train_batch_size=200)
CASES = {
    "ppo_multi_device": ("PPO", dict(PPO, optimizer="multi_device")),
    "ppo_sync_samples": ("PPO", dict(PPO, optimizer="sync_samples")),
    "ppo_allreduce": ("PPO", dict(PPO, optimizer="allreduce")),
    "a3c_async_gradients": ("A3C", dict(A3C, optimizer="async_gradients", grads_per_step=20)),
    "a3c_sharded_ps_1": ("A3C", dict(A3C, optimizer="sharded_ps", num_ps_shards=1)),
    "a3c_sharded_ps_2": ("A3C", dict(A3C, optimizer="sharded_ps", num_ps_shards=2)),
    "a3c_sharded_ps_4": ("A3C", dict(A3C, optimizer="sharded_ps", num_ps_shards=4)),
    "a3c_allreduce": ("A3C", dict(A3C, optimizer="allreduce")),
}


def run_case(name: str, seconds: float) -> str:
    from tfrl.agents.registry import get_trainer_class

    algorithm, config = CASES[name]
    trainer = get_trainer_class(algorithm)(config=dict(config), env="CartPole-v1")
    try:
        trainer.train()  # warm-up
        sampled0 = trainer.optimizer.num_steps_sampled
        trained0 = trainer.optimizer.num_steps_trained
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            trainer.train()
        elapsed = time.perf_counter() - start
        sampled = trainer.optimizer.num_steps_sampled - sampled0
        trained = trainer.optimizer.num_steps_trained - trained0
    finally:
        trainer.stop()
    return (f"{name:22s} sampled {sampled / elapsed:9.1f} steps/s  trained "
            f"{trained / elapsed:9.1f} steps/s  ({elapsed:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores", flush=True)
    try:
        for name in args.cases.split(","):
            print(run_case(name, args.seconds), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
