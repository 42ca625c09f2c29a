"""How many seeds of a shipped tuned example reach its stop reward: each seed trains the example
(the YAML `tfrl train -f` reads, with `seed` set) in a fresh process, through the full path.

    python tools/seed_reliability.py cartpole-ppo [--seeds 20] [--first-seed 1] [--parallel 2]
        [--max-seconds 300] [--max-steps N] [--set lr=0.0005 ...] [--require 19]

Prints one line per seed as it ends, then the count:

    seed=3 reached env_steps=61440 seconds=41.2 reward=452.1
    seed=4 NOT_REACHED (env-step cap) env_steps=100352 seconds=70.4 reward=233.0 best=301.5
    cartpole-ppo: 19 of 20 seeds reached episode_reward_mean 450 (...medians...)

A seed stops at the example's stop reward, at `--max-steps` env steps (default: the example's
own `timesteps_total` stop, the budget `tfrl train` gives it) or at `--max-seconds` of wall
clock from the trainer's construction, whichever comes first; a process that overruns that by
`KILL_GRACE_S` is killed with its process group (its local Ray with it). `--parallel 2` runs two
seeds at a time, each with its own local Ray. `seconds` counts from the trainer's construction,
so start-up is included. The load average is printed at the start and the end: on a loaded
machine the seconds grow, the env steps do not. With `--require K` the exit status is 1 when
fewer than K seeds reached the stop reward. SIGTERM or Ctrl-C ends the running seeds and prints
the count of those that ended. A seed whose process crashes without a result
(on a loaded machine, Ray may declare its own node dead) runs again, `--retries` times.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

BUDGET_KEYS = ("timesteps_total", "training_iteration", "time_total_s")
RESULT_PREFIX = "SEED_RESULT "
KILL_GRACE_S = 120.0  # start-up plus one slow iteration past --max-seconds


class SeedReliabilityError(Exception):
    """The example has no stop reward to count, or a seed's process gave no result."""


def stop_reward(stop: dict) -> tuple:
    """The example's stop reward as (result key, value): the one stop criterion that is not a
    budget (`timesteps_total`, `training_iteration`, `time_total_s`).

    Raises:
        SeedReliabilityError: the stop criteria name no reward, or more than one.
    """
    rewards = [(key, value) for key, value in stop.items() if key not in BUDGET_KEYS]
    if len(rewards) != 1:
        raise SeedReliabilityError(
            f"the example's stop criteria must name exactly one reward besides "
            f"{', '.join(BUDGET_KEYS)}; got {sorted(stop)}")
    return rewards[0]


def result_value(result: dict, key: str) -> float:
    """`result[key]`, a slash naming a nested result (`evaluation/episode_reward_mean`); NaN
    where the result has no such value yet."""
    current = result
    for part in key.split("/"):
        current = current.get(part) if isinstance(current, dict) else None
    return float("nan") if current is None else float(current)


def verdict(reward: float, target: float, steps: int, max_steps: float, elapsed: float,
            max_seconds: float):
    """Why a seed stops after an iteration ("reached", "env-step cap", "time cap"), or None to
    go on; the stop reward wins when a cap is reached in the same iteration."""
    if reward >= target:
        return "reached"
    if steps >= max_steps:
        return "env-step cap"
    return "time cap" if elapsed >= max_seconds else None


def train_one_seed(name: str, seed: int, max_seconds: float, max_steps, overrides: dict) -> dict:
    """Trains `name` with `seed` until its stop reward, `max_steps` env steps or `max_seconds`;
    returns the outcome as a dict (reached, why, env_steps, seconds, reward, best)."""
    from tfrl.cli import load_experiment_file
    from tfrl.registry import get_trainer_class
    from tfrl.runtime import ensure_ray

    ensure_ray({})  # a local Ray, as `tfrl train` starts it
    experiment = load_experiment_file(name)
    key, target = stop_reward(experiment["stop"])
    if max_steps is None:
        max_steps = experiment["stop"].get("timesteps_total", float("inf"))
    experiment["config"].update(overrides, seed=seed)
    built = time.time()
    trainer = get_trainer_class(experiment["run"])(config=experiment["config"],
                                                    env=experiment["env"])
    best = float("-inf")
    try:
        while True:
            result = trainer.train()
            reward = result_value(result, key)
            best = max(best, reward) if reward == reward else best
            elapsed = time.time() - built
            steps = result["timesteps_total"]
            why = verdict(reward, target, steps, max_steps, elapsed, max_seconds)
            if why:
                return {"seed": seed, "reached": why == "reached", "why": why, "env_steps": steps,
                        "seconds": round(elapsed, 1), "reward": reward, "best": best,
                        "key": key, "target": target}
    finally:
        trainer.stop()


def seed_command(args, seed: int) -> list:
    command = [sys.executable, os.path.abspath(__file__), args.example, "--one-seed", str(seed),
               "--max-seconds", str(args.max_seconds)]
    if args.max_steps is not None:
        command += ["--max-steps", str(args.max_steps)]
    if args.set:
        command += ["--set", *args.set]
    return command


def finish(process: subprocess.Popen, log, seed: int, killed: bool) -> dict:
    """The outcome a seed's process printed, or a failure record naming the file that keeps
    its whole output."""
    process.wait()
    log.seek(0)
    out = log.read()
    log.close()
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    with tempfile.NamedTemporaryFile("w", prefix=f"seed{seed}-", suffix=".log",
                                     delete=False) as kept:
        kept.write(out)
    errors = [line for line in out.splitlines() if "Error" in line or "dead" in line]
    cause = "killed after overrunning" if killed else f"exit {process.returncode}"
    return {"seed": seed, "reached": False, "failed": True,
            "why": f"{cause}: {errors[-1].strip()[:300] if errors else 'no error line'}; "
                   f"output in {kept.name}"}


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_seeds(args, outcomes: list) -> None:
    """Runs the seeds, `args.parallel` processes at a time; appends each outcome to `outcomes`
    and prints it as it ends. A
    seed whose process gave no result (a crash, e.g. its local Ray declared dead on a loaded
    machine) runs again, up to `args.retries` times."""
    pending = list(args.seed_list or range(args.first_seed, args.first_seed + args.seeds))
    retries_left = {seed: args.retries for seed in pending}
    running = {}  # seed -> (process, its output file, started)
    try:
        while pending or running:
            while pending and len(running) < args.parallel:
                seed = pending.pop(0)
                # a file, not a pipe: a chatty seed must not block on a full pipe
                log = tempfile.TemporaryFile("w+")
                process = subprocess.Popen(seed_command(args, seed), stdout=log,
                                           stderr=subprocess.STDOUT, text=True,
                                           start_new_session=True)
                running[seed] = (process, log, time.time())
            time.sleep(0.5)
            for seed, (process, log, started) in list(running.items()):
                overrun = time.time() - started > args.max_seconds + KILL_GRACE_S
                if process.poll() is None and not overrun:
                    continue
                if overrun:
                    kill_group(process)
                outcome = finish(process, log, seed, killed=overrun)
                kill_group(process)  # whatever the seed's local Ray left behind
                del running[seed]
                if outcome.get("failed") and retries_left[seed] > 0:
                    retries_left[seed] -= 1
                    pending.insert(0, seed)
                    print(seed_line(outcome) + " - running it again", flush=True)
                    continue
                outcomes.append(outcome)
                print(seed_line(outcome), flush=True)
    finally:
        for process, _, _ in running.values():
            kill_group(process)


def seed_line(outcome: dict) -> str:
    if outcome.get("failed"):
        return f"seed={outcome['seed']} FAILED ({outcome['why']})"
    head = (f"seed={outcome['seed']} reached" if outcome["reached"]
            else f"seed={outcome['seed']} NOT_REACHED ({outcome['why']})")
    line = (f"{head} env_steps={outcome['env_steps']} seconds={outcome['seconds']:.1f} "
            f"reward={outcome['reward']:.1f}")
    return line if outcome["reached"] else f"{line} best={outcome['best']:.1f}"


def summary(name: str, outcomes: list) -> str:
    reached = [outcome for outcome in outcomes if outcome["reached"]]
    known = next((outcome for outcome in outcomes if "key" in outcome), None)
    target = f"{known['key']} {known['target']:g}" if known else "its stop reward"
    line = f"{name}: {len(reached)} of {len(outcomes)} seeds reached {target}"
    failed = sum(bool(outcome.get("failed")) for outcome in outcomes)
    if failed:
        line += f" ({failed} crashed without a result)"
    if reached:
        steps = [outcome["env_steps"] for outcome in reached]
        seconds = [outcome["seconds"] for outcome in reached]
        line += (f" (of those: median env_steps={statistics.median(steps):.0f} "
                 f"[{min(steps)}-{max(steps)}], median seconds={statistics.median(seconds):.1f} "
                 f"[{min(seconds):.1f}-{max(seconds):.1f}])")
    return line


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def parse_overrides(items: list) -> dict:
    import yaml

    return {key: yaml.safe_load(value)
            for key, _, value in (item.partition("=") for item in items)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example", help="a shipped tuned example's name (cartpole-ppo) or a YAML path")
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds (default 20)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--seed-list", type=int, nargs="+", default=None, metavar="SEED",
                        help="these seeds instead of --seeds/--first-seed")
    parser.add_argument("--parallel", type=int, default=1, help="seeds running at a time")
    parser.add_argument("--max-seconds", type=float, default=300.0,
                        help="wall-clock cap per seed, from the trainer's construction")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="env-step cap per seed (default: the example's timesteps_total stop)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides, each value read as YAML")
    parser.add_argument("--retries", type=int, default=1,
                        help="runs again a seed whose process crashed without a result (default 1)")
    parser.add_argument("--require", type=int, default=None, metavar="K",
                        help="exit with status 1 when fewer than K seeds reached the stop reward")
    parser.add_argument("--one-seed", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parallel < 1 or args.seeds < 1:
        parser.error("--seeds and --parallel must be at least 1")
    if args.one_seed is not None:
        outcome = train_one_seed(args.example, args.one_seed, args.max_seconds, args.max_steps,
                                 parse_overrides(args.set))
        print(RESULT_PREFIX + json.dumps(outcome), flush=True)
        return
    seeds = (" ".join(map(str, args.seed_list)) if args.seed_list
             else f"{args.first_seed}-{args.first_seed + args.seeds - 1}")
    print(f"{args.example}: seeds {seeds}, {args.parallel} at a time; "
          f"load average at start {load_average()}", flush=True)
    # `timeout` and `kill` send SIGTERM: end the running seeds and count the finished ones
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    outcomes = []
    try:
        run_seeds(args, outcomes)
    except (KeyboardInterrupt, SystemExit):
        print(f"interrupted: the count covers the {len(outcomes)} seeds that ended", flush=True)
        raise
    finally:
        outcomes.sort(key=lambda outcome: outcome["seed"])
        print(f"load average at end {load_average()}", flush=True)
        print(summary(args.example, outcomes), flush=True)
    reached = sum(outcome["reached"] for outcome in outcomes)
    if args.require is not None and reached < args.require:
        sys.exit(1)


if __name__ == "__main__":
    main()
