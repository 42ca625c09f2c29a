"""Benchmark of the policy optimizer strategies: env steps sampled and trained per second on
CartPole with 2 rollout workers, one line per case (PPO: multi_device, sync_samples,
allreduce; A3C: async_gradients, sharded_ps with 1, 2 and 4 shards, allreduce).

    python tools/bench_optimizers.py [--seconds 20] [--cases a3c_sharded_ps_2,ppo_allreduce]

Each case builds a trainer, runs one warm-up iteration (actor start, tracing), then trains for
`--seconds` and prints the rates over that time. The machine's load average is printed first.

    python tools/bench_optimizers.py --compare-auto 60 [--algorithms PPO,A3C] [--rounds 2]

runs every fixed strategy the algorithm allows and `optimizer: auto` on the same workload for
the same wall time, counted from the first `train()` call (no warm-up is left out: auto's
trials and every strategy's tracing are part of what it costs), prints one line each (with the
strategy auto committed to and its measured trial rates) and the ratio of auto's trained env
steps/s to the best fixed strategy's.

    python tools/bench_optimizers.py --table3 30

is the RLlib paper's Table 3 in small: PPO with local multi-device SGD (the driver's learner on
two devices, with 1 device for reference) against allreduce across 2 rollout workers, one line
each with the SGD samples/s (rows trained per second of the learn phase, sampling left out).
Without GPUs the two devices are logical CPU devices: this process splits its CPU in two with
`tf.config.set_logical_device_configuration` before TensorFlow starts, and the line says so.
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
    from tfrl.registry import get_trainer_class

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


# --compare-auto: the fixed strategies of each algorithm (all it allows) and its auto config
COMPARED = {
    "PPO": (PPO, ("multi_device", "sync_samples", "allreduce")),
    "A3C": (dict(A3C, grads_per_step=20), ("async_gradients", "sharded_ps", "allreduce")),
}


def timed_run(algorithm: str, config: dict, seconds: float):
    """Trains from the first `train()` call for `seconds` of wall time; returns (sampled/s,
    trained/s, elapsed, the optimizer's `info/optimizer` dict or None)."""
    from tfrl.registry import get_trainer_class

    trainer = get_trainer_class(algorithm)(config=dict(config), env="CartPole-v1")
    try:
        start = time.perf_counter()
        info = None
        while time.perf_counter() - start < seconds:
            info = trainer.train()["info"].get("optimizer")
        elapsed = time.perf_counter() - start
        sampled = trainer.optimizer.num_steps_sampled
        trained = trainer.optimizer.num_steps_trained
    finally:
        trainer.stop()
    return sampled / elapsed, trained / elapsed, elapsed, info


def compare_auto(algorithm: str, seconds: float, rounds: int) -> None:
    """`rounds` rounds over the cases, every other one in reverse order (so a load that drifts
    during the run favours no case); the ratio is printed per round and over all rounds."""
    base, strategies = COMPARED[algorithm]
    cases = (*strategies, "auto")
    totals = dict.fromkeys(cases, 0.0)
    for round_index in range(rounds):
        trained_rates = _compare_round(algorithm, base, cases[::-1] if round_index % 2 else cases,
                                       seconds)
        _print_ratio(f"{algorithm} round {round_index + 1}", trained_rates, strategies)
        for case, rate in trained_rates.items():
            totals[case] += rate / rounds
    if rounds > 1:
        _print_ratio(f"{algorithm} mean of {rounds} rounds", totals, strategies)


def _print_ratio(label: str, trained_rates: dict, strategies) -> None:
    best = max(strategies, key=trained_rates.get)
    print(f"{label}: auto/best trained steps/s {trained_rates['auto'] / trained_rates[best]:.3f} "
          f"(best fixed: {best}, {trained_rates[best]:.1f}; auto {trained_rates['auto']:.1f})",
          flush=True)


def _compare_round(algorithm: str, base: dict, cases, seconds: float) -> dict:
    trained_rates = {}
    for strategy in cases:
        load = os.getloadavg()[0]
        sampled, trained, elapsed, info = timed_run(algorithm, dict(base, optimizer=strategy),
                                                    seconds)
        trained_rates[strategy] = trained
        detail = ""
        if strategy == "auto" and info:
            rates = ", ".join(f"{n} {r:.0f}" for n, r in info["rates"].items())
            detail = (f"  -> {info['strategy']} ({info['phase']}, {info['num_switches']} "
                      f"switches; trial rates: {rates})")
        print(f"{algorithm} {strategy:16s} sampled {sampled:8.1f} steps/s  trained "
              f"{trained:8.1f} steps/s  ({elapsed:.1f} s, load {load:.2f}){detail}", flush=True)
    return trained_rates


# --table3: PPO with bigger SGD work per iteration than the throughput cases
TABLE3_PPO = dict(PPO, train_batch_size=1200, sgd_minibatch_size=300, num_sgd_iter=8,
                  model={"fcnet_hiddens": [256, 256]})
TABLE3_CASES = {
    "multi_device_2dev": dict(TABLE3_PPO, optimizer="multi_device", num_learner_devices=2),
    "multi_device_1dev": dict(TABLE3_PPO, optimizer="multi_device", num_learner_devices=1),
    "allreduce_2workers": dict(TABLE3_PPO, optimizer="allreduce"),
}


def split_cpu_into_logical_devices(count: int) -> str:
    """Makes TensorFlow show `count` devices to this process (must run before TF starts):
    the GPUs when there are that many, else `count` logical CPU devices. Returns which."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= count:
        return f"{count} GPUs ({', '.join(g.name for g in gpus[:count])})"
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    return f"{count} logical CPU devices on {os.cpu_count()} cores (no GPU)"


def table3(seconds: float, devices: str) -> None:
    from tfrl.registry import get_trainer_class

    for name, config in TABLE3_CASES.items():
        load = os.getloadavg()[0]
        trainer = get_trainer_class("PPO")(config=dict(config), env="CartPole-v1")
        try:
            trainer.train()  # warm-up: actor start, tracing
            optimizer = trainer.optimizer
            trained0, learn0 = optimizer.num_steps_trained, optimizer.timers["learn"].total
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                trainer.train()
            elapsed = time.perf_counter() - start
            trained = optimizer.num_steps_trained - trained0
            learn = optimizer.timers["learn"].total - learn0
        finally:
            trainer.stop()
        print(f"table3 PPO {name:20s} SGD {trained / learn:9.1f} samples/s  overall trained "
              f"{trained / elapsed:9.1f} steps/s  ({elapsed:.1f} s, load {load:.2f}; {devices})",
              flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--compare-auto", type=float, metavar="SECONDS", default=None,
                        help="compare auto with each fixed strategy over SECONDS of training")
    parser.add_argument("--algorithms", default=",".join(COMPARED),
                        help="algorithms for --compare-auto")
    parser.add_argument("--rounds", type=int, default=1,
                        help="--compare-auto rounds (every other one in reverse order)")
    parser.add_argument("--table3", type=float, metavar="SECONDS", default=None,
                        help="PPO multi-device SGD vs allreduce, SGD samples/s, SECONDS each")
    args = parser.parse_args(argv)
    devices = split_cpu_into_logical_devices(2) if args.table3 is not None else ""
    import ray

    # address="local": a Ray of its own, never a cluster another program started
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores", flush=True)
    try:
        if args.table3 is not None:
            table3(args.table3, devices)
        elif args.compare_auto is not None:
            for algorithm in args.algorithms.split(","):
                compare_auto(algorithm, args.compare_auto, args.rounds)
        else:
            for name in args.cases.split(","):
                print(run_case(name, args.seconds), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
