"""Time and env steps until a tuned example reaches its stop reward, through the full path
(Ray rollout workers, the embedded replay server, ReplayDataset, the learner).

    python tools/bench_learning.py cartpole-ppo [cartpole-dqn ...] [--max-seconds 300]

Prints one line per example: the wall-clock seconds and env steps until `episode_reward_mean`
(the mean return of the last 100 episodes) first reached the example's stop reward, counted from
the trainer's construction (start-up included) and from its first iteration.

With `--runs N` each example runs N times, each run in a fresh process (so one trainer's
start-up and teardown cannot slow the next), the examples alternating (run 1 of each, then run
2 of each, ...), and a last line per example gives the median seconds from construction.

With `--rates SECONDS` it measures the pipeline's speed instead: after 5 warm-up iterations it
trains for SECONDS and prints env steps, trained rows and gradient steps per second (the
policy optimizer's counters; gradient steps where the optimizer counts them, as Ape-X's does).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _experiment_and_trainer(name: str):
    """The tuned example's experiment dict and a trainer built from it."""
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file

    experiment = load_experiment_file(name)
    return experiment, get_trainer_class(experiment["run"])(config=experiment["config"],
                                                            env=experiment["env"])


def run(name: str, max_seconds: float) -> str:
    built = time.time()
    experiment, trainer = _experiment_and_trainer(name)
    target = experiment["stop"]["episode_reward_mean"]
    budget = experiment["stop"].get("timesteps_total", float("inf"))
    started = time.time()
    try:
        while True:
            result = trainer.train()
            elapsed = time.time() - started
            if result["episode_reward_mean"] >= target:
                return (f"{name} run={experiment['run']} reached={target} "
                        f"seconds={time.time() - built:.1f} seconds_training={elapsed:.1f} "
                        f"env_steps={result['timesteps_total']} iterations={result['training_iteration']}")
            if elapsed > max_seconds or result["timesteps_total"] >= budget:
                return (f"{name} run={experiment['run']} NOT_REACHED target={target} "
                        f"best_recent_mean={result['episode_reward_mean']:.1f} "
                        f"seconds={time.time() - built:.1f} seconds_training={elapsed:.1f} "
                        f"env_steps={result['timesteps_total']}")
    finally:
        trainer.stop()


def rates(name: str, seconds: float) -> str:
    experiment, trainer = _experiment_and_trainer(name)
    try:
        for _ in range(5):
            trainer.train()
        optimizer = trainer.optimizer
        counters = ("num_steps_sampled", "num_steps_trained", "num_train_steps")
        before = [getattr(optimizer, c, 0) for c in counters]
        started = time.time()
        while time.time() - started < seconds:
            trainer.train()
        elapsed = time.time() - started
        sampled, trained, steps = ((getattr(optimizer, c, 0) - b) / elapsed
                                   for c, b in zip(counters, before))
        return (f"{name} run={experiment['run']} env_steps_per_s={sampled:.0f} "
                f"rows_trained_per_s={trained:.0f} gradient_steps_per_s={steps:.0f} "
                f"seconds={elapsed:.1f}")
    finally:
        trainer.stop()


def fresh_process_runs(examples, runs: int, max_seconds: float) -> None:
    """Runs each example `runs` times, each in its own process, alternating; prints every
    run's line and then `name median_seconds=... reached=k/runs` per example (a run that did
    not reach the stop reward counts with its seconds from construction until it gave up)."""
    seconds = {name: [] for name in examples}
    reached = {name: 0 for name in examples}
    for run_index in range(runs):
        for name in examples:
            command = [sys.executable, os.path.abspath(__file__), name, "--max-seconds", str(max_seconds)]
            out = subprocess.run(command, capture_output=True, text=True, check=False).stdout
            line = next((text for text in out.splitlines() if text.startswith(name + " ")), None)
            if line is None:
                print(f"{name} run {run_index + 1} FAILED", flush=True)
                continue
            print(f"run {run_index + 1}: {line}", flush=True)
            found = re.search(r" seconds=([0-9.]+)", line)
            if found:
                seconds[name].append(float(found.group(1)))
            reached[name] += " reached=" in line
    for name in examples:
        values = seconds[name]
        median = f"{statistics.median(values):.1f}" if values else "nan"
        print(f"{name} median_seconds={median} reached={reached[name]}/{runs} "
              f"all={','.join(f'{v:.1f}' for v in values)}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", nargs="+", help="tuned example names or YAML paths")
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--rates", type=float, default=None, metavar="SECONDS",
                        help="measure env steps, trained rows and gradient steps per second over "
                             "SECONDS after 5 warm-up iterations, instead of time to the stop reward")
    parser.add_argument("--runs", type=int, default=None, metavar="N",
                        help="run every example N times, each run in a fresh process, alternating "
                             "between examples; print each run and the median per example")
    args = parser.parse_args(argv)
    if args.runs:
        fresh_process_runs(args.examples, args.runs, args.max_seconds)
        return
    from tfrl.runtime import ensure_ray

    ensure_ray({})  # local Ray as the trainer starts it (`tfrl train` does the same)
    for name in args.examples:
        print(rates(name, args.rates) if args.rates else run(name, args.max_seconds), flush=True)


if __name__ == "__main__":
    main()
