"""Env frames per second of the scale-out algorithms with 1, 2, 4, ... rollout workers, and the
ratio to one worker (the RLlib paper's scaling curve), through the full path.

    python tools/bench_scaling.py [--algo apex] [--algo impala] [--workers 1,2,4] [--seconds 30]

Prints one line per case: the algorithm, the number of workers, env frames (env steps) sampled
per second over `--seconds` after a warm-up iteration, and that rate over the one-worker rate
(the first case of `--workers`), plus the machine's load average, since the figure depends on
what else runs. Each algorithm is a runner in RUNNERS: runner(num_workers, args) -> env steps per
second.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def frames_per_second(trainer, seconds: float) -> float:
    """Env steps sampled per second by `trainer` over `seconds`, after one warm-up iteration."""
    trainer.train()
    optimizer = trainer.optimizer
    start_steps, start = optimizer.num_steps_sampled, time.time()
    while time.time() - start < seconds:
        trainer.train()
    return (optimizer.num_steps_sampled - start_steps) / (time.time() - start)


def run_apex(num_workers: int, args) -> float:
    """Ape-X on CartPole-v1: `num_workers` workers of `--envs-per-worker` envs writing into
    `--shards` replay shards while the learner thread trains (as fast as it can)."""
    from tfrl.agents.dqn import ApexTrainer

    trainer = ApexTrainer(env="CartPole-v1", config={
        "num_workers": num_workers, "num_envs_per_worker": args.envs_per_worker,
        # more workers than cores share them (Ray would otherwise leave the extra ones pending)
        "num_cpus_per_worker": min(1.0, (os.cpu_count() or 1) / num_workers),
        "rollout_fragment_length": 50, "num_replay_shards": args.shards,
        "learning_starts": 1000, "buffer_size": 100000, "train_batch_size": 64,
        "target_network_update_freq": 8000, "max_weight_sync_delay": 16,
        "timesteps_per_iteration": 1000, "min_iter_time_s": 1, "driver_tf_threads": 1,
        "hiddens": [64], "model": {"fcnet_hiddens": [64]}})
    try:
        return frames_per_second(trainer, args.seconds)
    finally:
        trainer.stop()


def run_impala(num_workers: int, args) -> float:
    """IMPALA on CartPole-v1: asynchronous sampling into the learner queue, the V-trace learner
    thread in the driver."""
    from tfrl.agents.impala import ImpalaTrainer

    trainer = ImpalaTrainer(env="CartPole-v1", config={
        "num_workers": num_workers, "num_envs_per_worker": args.envs_per_worker,
        "num_cpus_per_worker": min(1.0, (os.cpu_count() or 1) / num_workers),
        "rollout_fragment_length": 50, "train_batch_size": 500, "min_iter_time_s": 1,
        "model": {"fcnet_hiddens": [64, 64]}})
    try:
        return frames_per_second(trainer, args.seconds)
    finally:
        trainer.stop()


# algorithm name -> runner(num_workers, args) -> env frames per second
RUNNERS = {
    "apex": run_apex,
    "impala": run_impala,
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=sorted(RUNNERS), action="append",
                        help="algorithm(s) to measure (default: all)")
    parser.add_argument("--workers", nargs="+", default=["1,2,4"],
                        help="worker counts, comma- or space-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured time per case")
    parser.add_argument("--envs-per-worker", type=int, default=8)
    parser.add_argument("--shards", type=int, default=2, help="replay shards (Ape-X)")
    args = parser.parse_args(argv)
    from tfrl.runtime import ensure_ray

    ensure_ray({})
    counts = [int(n) for part in args.workers for n in part.split(",") if n]
    for algo in args.algo or sorted(RUNNERS):
        baseline = None
        for num_workers in counts:
            rate = RUNNERS[algo](num_workers, args)
            baseline = baseline or rate
            load = os.getloadavg()[0]
            print(f"algo={algo} workers={num_workers} envs_per_worker={args.envs_per_worker} "
                  f"env_frames_per_s={rate:.0f} ratio_to_{counts[0]}_worker={rate / baseline:.2f} "
                  f"load_avg_1m={load:.1f}", flush=True)


if __name__ == "__main__":
    main()
