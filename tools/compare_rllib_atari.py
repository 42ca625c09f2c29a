"""This project's IMPALA on Pong against RLlib's APPO, the sides one after the other in one run:
env frames per second over a fixed time.

    python tools/compare_rllib_atari.py --rllib-python PATH/TO/venv/bin/python [--seconds 600]
        [--workers 2] [--envs-per-worker 4] [--runs 1]

RLlib is not a dependency: it runs in its own virtualenv (for example `python -m venv V &&
V/bin/pip install "ray[rllib]" torch==2.13.0 "gymnasium[atari]" opencv-python`), whose Python is passed by path.
Both sides play `ALE/Pong-v5` (sticky actions as v5 defines them) with the same preprocessing:
frame skip 4 with max-pooling, 84x84 grayscale, up to 30 no-ops at reset, the last 4 frames
stacked. Ours is the shipped `pong-impala` example (tfrl.env.atari's wrappers), run by
tools/bench_atari.py. Theirs is RLlib's
new-API-stack APPO built as its `tuned_examples/appo/pong_appo.py` builds it
(`wrap_atari_for_new_api_stack` and `FrameStackingEnvToModule` / `FrameStackingLearner`), with
ours's sizes wherever the two differ: 84x84 frames, the same three-layer conv net with a 256-unit
head, fragments of 50 steps, batches of 500, lr 0.0005. Both use `--workers` rollout workers
(RLlib: env runners) of `--envs-per-worker` envs each. Ours learns in the driver process; RLlib's
APPO learns in an actor of its own, which asks Ray for a CPU, so its Ray gets one logical CPU
more than the machine has (the same physical cores).

The rate counts env steps (each 4 emulator frames; what both libraries count) from the end of
the first training iteration (so neither side's start-up, TensorFlow's or torch's first trace,
counts) for `--seconds`. Prints one line per side and run, then the ratio of the medians:

    run=1 side=tfrl env_frames_per_s=.. env_steps=.. episode_reward_mean=.. load_avg_1m=..
    median tfrl=.. rllib=.. ratio=..

A ratio above 1.0 means this project ran more env frames per second.
"""
import argparse
import os
import statistics
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
from tools.compare_sb3 import PROJECT_ROOT, start_side  # noqa: E402
from tools.peer_python import peer_unavailable  # noqa: E402

# Ours is the project's own Atari benchmark (tools/bench_atari.py), whose summary line the
# RLlib side's imitates.
OURS_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from tools.bench_atari import main
    main(["--algo", "impala", "--seconds", "{seconds}", "--workers", "{workers}",
          "--envs-per-worker", "{envs}"])
""")

RLLIB_SCRIPT = textwrap.dedent("""
    import os, time, warnings
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    warnings.filterwarnings("ignore")
    import gymnasium as gym
    import ray
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.connectors.env_to_module.frame_stacking import FrameStackingEnvToModule
    from ray.rllib.connectors.learner.frame_stacking import FrameStackingLearner
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack
    from ray.tune.registry import register_env

    def make_env(cfg):
        import ale_py
        gym.register_envs(ale_py)
        return wrap_atari_for_new_api_stack(gym.make("ALE/Pong-v5", **cfg), dim=84, framestack=None)

    register_env("pong", make_env)
    # APPO's learner is an actor of its own that asks for a CPU: one logical CPU more than the
    # machine has lets it start beside the env runners (all share the same cores, as ours do)
    ray.init(num_cpus=os.cpu_count() + 1, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    config = (
        APPOConfig()
        .environment("pong", env_config={{"frameskip": 1}}, clip_rewards=True)
        .env_runners(num_env_runners={workers}, num_envs_per_env_runner={envs},
                     rollout_fragment_length=50,
                     env_to_module_connector=lambda env, spaces=None, device=None:
                         FrameStackingEnvToModule(num_frames=4))
        .learners(learner_connector=lambda obs_space, act_space: FrameStackingLearner(num_frames=4))
        .training(train_batch_size_per_learner=500, lr=0.0005, vf_loss_coeff=0.5,
                  entropy_coeff=0.01, grad_clip=40.0)
        .rl_module(model_config=DefaultModelConfig(
            vf_share_layers=True, conv_filters=[(16, 8, 4), (32, 4, 2), (64, 3, 1)],
            conv_activation="relu", head_fcnet_hiddens=[256]))
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        start = time.time()
        start_steps = result["num_env_steps_sampled_lifetime"]
        while time.time() - start < {seconds}:
            result = algo.train()
        elapsed = time.time() - start
        steps = result["num_env_steps_sampled_lifetime"]
        print(f"algo=appo env_frames_per_s={{(steps - start_steps) / elapsed:.0f}} "
              f"env_steps={{int(steps)}} "
              f"episode_reward_mean={{result['env_runners'].get('episode_return_mean', float('nan')):.2f}}",
              flush=True)
    finally:
        algo.stop()
        ray.shutdown()
""")


def finish_rate(side: str, process, timeout: float) -> dict:
    """Waits for a started side; returns its summary line's fields (env_frames_per_s, env_steps,
    episode_reward_mean, ...) as strings."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    for line in reversed(stdout.splitlines()):
        if line.startswith("algo=") and "env_frames_per_s=" in line:
            return dict(field.split("=", 1) for field in line.split())
    raise RuntimeError(f"{side} produced no rate (exit {process.returncode}):\n"
                       f"{stdout[-2000:]}\n{stderr[-4000:]}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rllib-python", default="", help="a Python with ray[rllib], torch and ale-py")
    parser.add_argument("--seconds", type=float, default=600.0, help="measured seconds per side")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs-per-worker", type=int, default=4)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    sizes = dict(workers=args.workers, envs=args.envs_per_worker, seconds=args.seconds)
    sides = [("tfrl", sys.executable, OURS_SCRIPT.format(root=PROJECT_ROOT, **sizes))]
    why_not = peer_unavailable(args.rllib_python, "ray.rllib, torch, ale_py, cv2", "--rllib-python")
    if why_not is None:
        sides.append(("rllib", args.rllib_python, RLLIB_SCRIPT.format(**sizes)))
    else:
        print(f"rllib not available ({why_not}): pass --rllib-python with a Python that imports "
              "ray.rllib, torch, ale_py and cv2 (opencv-python)")
    rates = {side: [] for side, _, _ in sides}
    for run in range(1, args.runs + 1):
        for side, python, script in sides:
            summary = finish_rate(side, start_side(python, script), args.seconds + 900)
            rates[side].append(float(summary["env_frames_per_s"]))
            print(f"run={run} side={side} env_frames_per_s={summary['env_frames_per_s']} "
                  f"env_steps={summary['env_steps']} "
                  f"episode_reward_mean={summary['episode_reward_mean']} "
                  f"load_avg_1m={os.getloadavg()[0]:.1f}", flush=True)
    medians = {side: statistics.median(values) for side, values in rates.items()}
    line = "median " + " ".join(f"{side}={rate:.0f}" for side, rate in medians.items())
    if "rllib" in medians:
        line += f" ratio={medians['tfrl'] / medians['rllib']:.2f}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
