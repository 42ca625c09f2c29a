"""This project's DQN against RLlib's, side by side in one run, on CartPole-v1.

    python tools/compare_rllib.py --rllib-python PATH/TO/venv/bin/python [--runs 3]
        [--max-seconds 600] [--max-steps 200000] [--curve 10000]

RLlib is not a dependency: it runs in its own virtualenv (for example `python -m venv V &&
V/bin/pip install "ray[rllib]" torch==2.13.0`), whose Python is passed by path. Both sides train
until the mean return of the last 100 finished episodes first reaches 450, wall clock counted
from the construction of the trainer (each side's library is imported, and its Ray started,
before the clock starts). Ours: the `cartpole-dqn` tuned example through the full path (a Ray
rollout worker, the embedded replay server, ReplayDataset, the learner). Theirs: RLlib's tuned
example `rllib/tuned_examples/dqn/cartpole_dqn.py` (new API stack: double Q, dueling, 2-5-step
returns, prioritized replay of 50k, 256-unit tanh network with a 256-unit head, epsilon 1.0 to
0.02 over 10k steps, lr 5e-4, batches of 32; stop reward 450, 200k steps), built with
`config.build_algo()` and trained with `algo.train()`. RLlib's own
`env_runners/episode_return_mean` is not that criterion: on the new API stack it averages the
episodes that finished in the latest iterations (measured: it reads 367 when the last 100
episodes average 149, and 500 from about 41k env steps on, when they average 298). RLlib's side
therefore wraps the env so that each finished episode's return is appended to a file (the
wrapper of tools/cartpole_endings.py), and stops when the last 100 of those average 450, as
ours does. Ray gets the machine's CPUs on both sides. Runs alternate between the two sides.
Prints one line per run and a median line:

    run=1 ours_seconds=.. ours_env_steps=.. ours_reached=.. rllib_seconds=.. rllib_env_steps=..
        rllib_reached=.. seconds_ratio=.. steps_ratio=..

A ratio below 1.0 means this project needed less (time or env steps) than RLlib. A run that
stops at the budget counts with the seconds and steps it used (`reached=False`).
"""
import argparse
import os
import statistics
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
from tools.compare_sb3 import OURS_SCRIPT, PROJECT_ROOT, finish_side, start_side  # noqa: E402
from tools.peer_python import peer_unavailable  # noqa: E402

TARGET = 450.0

RLLIB_SCRIPT = textwrap.dedent("""
    import os, tempfile, time, warnings
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    warnings.filterwarnings("ignore")
    import sys
    import ray
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env
    sys.path.insert(0, {tools!r})
    from cartpole_endings import endings_env, last_episodes  # our side's diagnosis uses them

    def mean_of_last_100(path):
        returns = [episode_return for episode_return, _ in last_episodes(path, 100)]
        return sum(returns) / len(returns) if len(returns) == 100 else float("nan")

    returns_file = tempfile.NamedTemporaryFile("w", suffix=".returns", delete=False).name
    register_env("FinishedEpisodesCartPole", endings_env(returns_file))
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    config = (
        DQNConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .environment(env="FinishedEpisodesCartPole")
        .training(
            lr=0.0005, train_batch_size_per_learner=32,
            replay_buffer_config={{"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000,
                                  "alpha": 0.6, "beta": 0.4}},
            n_step=(2, 5), double_q=True, dueling=True, epsilon=[(0, 1.0), (10000, 0.02)])
        .rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=[256], fcnet_activation="tanh", fcnet_bias_initializer="zeros_",
            head_fcnet_bias_initializer="zeros_", head_fcnet_hiddens=[256]))
    )
    built = time.time()
    algo = config.build_algo()
    next_curve = {curve}
    try:
        while True:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            mean = mean_of_last_100(returns_file)
            while next_curve and steps >= next_curve:
                print("CURVE", time.time() - built, steps, mean, flush=True)
                next_curve += {curve}
            if mean >= {target}:
                print("RESULT", time.time() - built, steps, flush=True)
                break
            if time.time() - built > {max_seconds} or steps >= {max_steps}:
                print("RESULT_NOT_REACHED", time.time() - built, steps, flush=True)
                break
    finally:
        algo.stop()
        ray.shutdown()
        os.unlink(returns_file)
""")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rllib-python", default="", help="a Python with ray[rllib] and torch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--max-steps", type=int, default=200_000)
    parser.add_argument("--curve", type=int, default=0,
                        help="print each side's mean return every N env steps (0: no curve)")
    args = parser.parse_args(argv)
    limits = dict(target=TARGET, max_seconds=args.max_seconds, max_steps=args.max_steps,
                  curve=args.curve)
    ours_script = OURS_SCRIPT.format(root=PROJECT_ROOT, case="cartpole-dqn", overrides={},
                                     **limits)
    rllib_script = RLLIB_SCRIPT.format(tools=os.path.dirname(os.path.abspath(__file__)), **limits)
    why_not = peer_unavailable(args.rllib_python, "ray.rllib, torch", "--rllib-python")
    have_rllib = why_not is None
    if not have_rllib:
        print(f"rllib not available ({why_not}): pass --rllib-python with a Python that imports "
              "ray.rllib and torch")
    timeout = args.max_seconds + 180
    ours_runs, rllib_runs = [], []
    for run in range(1, args.runs + 1):
        ours = finish_side("tfrl", start_side(sys.executable, ours_script), timeout)
        ours_runs.append(ours)
        line = f"run={run} ours_seconds={ours[0]:.1f} ours_env_steps={ours[1]} ours_reached={ours[2]}"
        if have_rllib:
            theirs = finish_side("rllib", start_side(args.rllib_python, rllib_script), timeout)
            rllib_runs.append(theirs)
            line += (f" rllib_seconds={theirs[0]:.1f} rllib_env_steps={theirs[1]}"
                     f" rllib_reached={theirs[2]} seconds_ratio={ours[0] / theirs[0]:.2f}"
                     f" steps_ratio={ours[1] / theirs[1]:.2f}")
        print(line, flush=True)
    ours_s = statistics.median(r[0] for r in ours_runs)
    ours_n = statistics.median(r[1] for r in ours_runs)
    median = f"median ours_seconds={ours_s:.1f} ours_env_steps={ours_n:.0f}"
    if rllib_runs:
        rllib_s = statistics.median(r[0] for r in rllib_runs)
        rllib_n = statistics.median(r[1] for r in rllib_runs)
        median += (f" rllib_seconds={rllib_s:.1f} rllib_env_steps={rllib_n:.0f}"
                   f" seconds_ratio={ours_s / rllib_s:.2f} steps_ratio={ours_n / rllib_n:.2f}")
    print(median, flush=True)


if __name__ == "__main__":
    main()
