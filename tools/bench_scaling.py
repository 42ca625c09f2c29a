"""Benchmark of scale-out: env frames/s of an asynchronous algorithm with 1, 2, 4, ... rollout
workers, and the ratio to one worker (the RLlib paper's scaling curve, on this machine).

Each case builds the algorithm's trainer on CartPole-v1 with N remote workers (the embedded
replay server, the learner in the driver), lets it warm up, then counts the env steps the
workers sample during a fixed wall-clock window of `train()` calls. One line per case.

    python tools/bench_scaling.py --algo impala [--workers 1 2 4 8] [--seconds 20] [--envs 8]

`RUNNERS` maps an algorithm name to the function that measures one case, so further algorithms
add one entry.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def measure_trainer(trainer, warmup_s: float, seconds: float) -> float:
    """Env frames/s sampled by `trainer`'s workers over `seconds` of train() after a warm-up."""
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        trainer.train()
    before = trainer.optimizer.num_steps_sampled
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        trainer.train()
    return (trainer.optimizer.num_steps_sampled - before) / (time.perf_counter() - start)


def run_impala(num_workers: int, envs_per_worker: int, seconds: float) -> float:
    """IMPALA: asynchronous sampling into the learner queue, V-trace learner in the driver."""
    from tfrl.agents.impala import ImpalaTrainer

    trainer = ImpalaTrainer(env="CartPole-v1", config={
        "num_workers": num_workers, "num_envs_per_worker": envs_per_worker,
        "num_cpus_per_worker": 0, "rollout_fragment_length": 50, "train_batch_size": 500,
        "min_iter_time_s": 1, "model": {"fcnet_hiddens": [64, 64]}})
    try:
        return measure_trainer(trainer, warmup_s=min(10.0, seconds), seconds=seconds)
    finally:
        trainer.stop()


RUNNERS: Dict[str, Callable[[int, int, float], float]] = {
    "impala": run_impala,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--envs", type=int, default=8, help="envs per worker")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window per case")
    args = parser.parse_args()
    from tfrl.runtime import ensure_ray

    ensure_ray({})
    runner = RUNNERS[args.algo]
    baseline = None
    for n in args.workers:
        rate = runner(n, args.envs, args.seconds)
        baseline = baseline or (rate if n == 1 else None)
        ratio = f"{rate / baseline:.2f}" if baseline else "n/a"
        print(f"{args.algo} workers={n} envs_per_worker={args.envs} env_frames_per_s={rate:.0f} "
              f"ratio_to_1_worker={ratio} load_avg_1m={os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
