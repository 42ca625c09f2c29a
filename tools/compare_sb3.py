"""This project against Stable-Baselines3, side by side in one run: PPO on CartPole-v1, SAC, TD3
and DDPG on Pendulum-v1, SAC on HalfCheetah-v5.

    python tools/compare_sb3.py --sb3-python PATH/TO/venv/bin/python [--case cartpole-ppo]
        [--runs 3] [--max-seconds 300] [--set jit_compile_learner=true ...]
    python tools/compare_sb3.py --sb3-python ... --case pendulum-sac --max-seconds 1800
    python tools/compare_sb3.py --sb3-python ... --case pendulum-td3 --max-seconds 1800 [--threads 1]
    python tools/compare_sb3.py --sb3-python ... --case halfcheetah-sac --runs 1 --concurrent \
        --max-seconds 3600 --curve 10000

Stable-Baselines3 is not a dependency: it runs in its own virtualenv (for example
`python -m venv V && V/bin/pip install stable-baselines3 torch==2.13.0`), whose Python is passed by
path. Both sides train to the same criterion, wall clock counted from the construction of the
trainer (each side's library, TensorFlow or torch, is imported before the clock starts).
cartpole-ppo: the mean return of the last 100 finished episodes first reaches 450 (ours:
the `cartpole-ppo` tuned example through the full path of Ray rollout workers, the embedded replay
server, ReplayDataset and the learner; theirs: rl-zoo's CartPole-v1 PPO settings in one process).
pendulum-sac / pendulum-td3 / pendulum-ddpg: the mean return of the last 10 finished episodes
first reaches -200 (ours: the tuned example of that name, checked after every iteration; theirs:
rl-zoo's Pendulum-v1 settings, checked after every env step). halfcheetah-sac: the same with a
target of 3000 on HalfCheetah-v5 (needs the mujoco extra on both sides) and rl-zoo's MuJoCo SAC
settings. Runs alternate between the two sides so that a change of load on the machine hits both;
with --concurrent the two sides of a run train at the same time instead, one core each on a
2-core machine (halves a long run's wall clock; each side then has the same machine share).
--curve N prints each side's mean return of the last 10 episodes every N env steps as
`curve side=.. env_steps=.. seconds=.. mean_return=..` lines. Prints one line per run and a
median line:

    run=1 ours_seconds=.. ours_env_steps=.. sb3_seconds=.. sb3_env_steps=.. seconds_ratio=.. steps_ratio=..

`--set KEY=VALUE` overrides a config key of this project's side (the value read as YAML).
A ratio below 1.0 means this project needed less (time or env steps) than Stable-Baselines3.
"""
import argparse
import os
import statistics
import subprocess
import sys
import textwrap

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PROJECT_ROOT)  # `python tools/compare_sb3.py` from a checkout

from tools.peer_python import peer_unavailable  # noqa: E402
from tools.seed_reliability import parse_overrides  # noqa: E402
TARGETS = {"cartpole-ppo": 450.0, "pendulum-sac": -200.0, "pendulum-td3": -200.0,
           "pendulum-ddpg": -200.0, "halfcheetah-sac": 3000.0}

OURS_SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tfrl.runtime import ensure_ray
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file
    ensure_ray({{}})
    experiment = load_experiment_file({case!r})
    experiment["config"].update({overrides!r})
    # the library is imported before the clock starts, as `from stable_baselines3 import ...` is
    trainer_class = get_trainer_class(experiment["run"])
    built = time.time()
    trainer = trainer_class(config=experiment["config"], env=experiment["env"])
    next_curve = {curve}
    try:
        while True:
            result = trainer.train()
            while next_curve and result["timesteps_total"] >= next_curve:
                print("CURVE", time.time() - built, result["timesteps_total"],
                      result["episode_reward_mean"], flush=True)
                next_curve += {curve}
            if result["episode_reward_mean"] >= {target}:
                print("RESULT", time.time() - built, result["timesteps_total"], flush=True)
                break
            if time.time() - built > {max_seconds} or result["timesteps_total"] >= {max_steps}:
                print("RESULT_NOT_REACHED", time.time() - built, result["timesteps_total"], flush=True)
                break
    finally:
        trainer.stop()
""")

# rl-zoo's hyperparameters for PPO on CartPole-v1 (rl-baselines3-zoo, hyperparams/ppo.yml),
# n_timesteps 1e5 included: the linear learning-rate and clip-range schedules run over it.
SB3_SCRIPTS = {}
SB3_SCRIPTS["cartpole-ppo"] = textwrap.dedent("""
    import time
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    def linear(start):
        return lambda progress_remaining: progress_remaining * start

    class StopAtReturn(BaseCallback):
        def _on_step(self):
            buffer = self.model.ep_info_buffer  # the last 100 finished episodes
            if len(buffer) >= 100 and np.mean([info["r"] for info in buffer]) >= {target}:
                return False
            return time.time() - built < {max_seconds}

    built = time.time()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=None)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                ent_coef=0.0, learning_rate=linear(0.001), clip_range=linear(0.2), device="cpu", verbose=0)
    model.learn(total_timesteps=100_000, callback=StopAtReturn())
    buffer = model.ep_info_buffer
    reached = len(buffer) >= 100 and np.mean([info["r"] for info in buffer]) >= {target}
    print("RESULT" if reached else "RESULT_NOT_REACHED", time.time() - built, model.num_timesteps, flush=True)
""")


# rl-zoo's hyperparameters for SAC and TD3 on Pendulum-v1 (hyperparams/sac.yml, td3.yml); the rest
# are Stable-Baselines3's defaults (SAC: 256x256 networks, batch 256, tau 0.005, gamma 0.99,
# learning_starts 100, automatic entropy coefficient; TD3: batch 256, tau 0.005, policy_delay 2,
# target noise 0.2 clipped at 0.5).
# One torch thread by default (--threads): torch's default follows the host's core count, far above
# a shared machine's share (SB3's SAC managed 714 env steps in 30 minutes that way here); tfrl's
# Pendulum examples also run TensorFlow in the driver with one thread (driver_tf_threads: 1), and
# --threads N gives both sides N.
_PENDULUM_LOOP = """
    import time
    import numpy as np
    import torch
    torch.set_num_threads({{threads}})
    from stable_baselines3 import {algo}
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import NormalActionNoise

    def mean_last10(model):
        returns = [info["r"] for info in model.ep_info_buffer][-10:]
        return np.mean(returns) if returns else float("nan")

    def last10(model):
        return len(model.ep_info_buffer) >= 10 and mean_last10(model) >= {{target}}

    class StopAtReturn(BaseCallback):
        next_curve = {{curve}}

        def _on_step(self):
            if self.next_curve and self.model.num_timesteps >= self.next_curve:
                print("CURVE", time.time() - built, self.model.num_timesteps, mean_last10(self.model),
                      flush=True)
                self.next_curve += {{curve}}
            if last10(self.model):
                return False
            return time.time() - built < {{max_seconds}}

    built = time.time()
    model = {algo}("MlpPolicy", "{env}", {kwargs}, device="cpu", verbose=0)
    model.learn(total_timesteps={{max_steps}}, callback=StopAtReturn())
    print("RESULT" if last10(model) else "RESULT_NOT_REACHED", time.time() - built,
          model.num_timesteps, flush=True)
"""
SB3_SCRIPTS["pendulum-sac"] = textwrap.dedent(_PENDULUM_LOOP.format(
    algo="SAC", env="Pendulum-v1", kwargs="learning_rate=1e-3"))
# rl-zoo's MuJoCo SAC settings (hyperparams/sac.yml, HalfCheetah): SB3's defaults (256x256, lr 3e-4,
# batch 256, a 1M buffer, tau 0.005, gamma 0.99, one gradient step per env step, automatic entropy
# coefficient) with 10,000 uniform random steps before learning.
SB3_SCRIPTS["halfcheetah-sac"] = textwrap.dedent(_PENDULUM_LOOP.format(
    algo="SAC", env="HalfCheetah-v5", kwargs="learning_starts=10_000"))
# rl-zoo gives TD3 and DDPG the same Pendulum-v1 settings (hyperparams/td3.yml, ddpg.yml).
_DETERMINISTIC_ACTOR_KWARGS = (
    "learning_rate=1e-3, gamma=0.98, buffer_size=200_000, learning_starts=10_000, train_freq=1, "
    "gradient_steps=1, action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), "
    "policy_kwargs=dict(net_arch=[400, 300])")
for _algo in ("TD3", "DDPG"):
    SB3_SCRIPTS[f"pendulum-{_algo.lower()}"] = textwrap.dedent(_PENDULUM_LOOP.format(
        algo=_algo, env="Pendulum-v1", kwargs=_DETERMINISTIC_ACTOR_KWARGS))


def start_side(python: str, script: str) -> subprocess.Popen:
    """Starts one training script in a fresh process."""
    return subprocess.Popen([python, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=PROJECT_ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})


def finish_side(side: str, process: subprocess.Popen, timeout: float) -> tuple[float, int, bool]:
    """Waits for a started script; prints its curve lines; returns (seconds, env steps, reached)."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    result = None
    for line in stdout.splitlines():
        if line.startswith("CURVE"):
            _, seconds, steps, mean_return = line.split()
            print(f"curve side={side} env_steps={int(float(steps))} seconds={float(seconds):.1f} "
                  f"mean_return={float(mean_return):.1f}", flush=True)
        elif line.startswith("RESULT"):
            tag, seconds, steps = line.split()
            result = float(seconds), int(float(steps)), tag == "RESULT"
    if result is None:
        raise RuntimeError(f"{side} produced no result (exit {process.returncode}):\n"
                           f"{stdout[-2000:]}\n{stderr[-4000:]}")
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sb3-python", default="", help="a Python with stable-baselines3 and torch")
    parser.add_argument("--case", choices=sorted(TARGETS), default="cartpole-ppo")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--max-steps", type=int, default=200_000)
    parser.add_argument("--threads", type=int, default=1,
                        help="continuous cases: torch threads for SB3 and driver_tf_threads for tfrl")
    parser.add_argument("--concurrent", action="store_true",
                        help="train both sides of a run at the same time (one core each)")
    parser.add_argument("--curve", type=int, default=0,
                        help="print each side's mean return every N env steps (0: no curve)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides of this project's side, each value read as YAML")
    args = parser.parse_args(argv)
    limits = dict(target=TARGETS[args.case], max_seconds=args.max_seconds, max_steps=args.max_steps,
                  curve=args.curve)
    continuous = args.case != "cartpole-ppo"
    overrides = {"driver_tf_threads": args.threads} if continuous else {}
    overrides.update(parse_overrides(args.set))
    ours_script = OURS_SCRIPT.format(root=PROJECT_ROOT, case=args.case, overrides=overrides, **limits)
    sb3_script = SB3_SCRIPTS[args.case].format(threads=args.threads, **limits)
    why_not = peer_unavailable(args.sb3_python, "stable_baselines3, torch", "--sb3-python")
    have_sb3 = why_not is None
    if not have_sb3:
        print(f"sb3 not available ({why_not}): pass --sb3-python with a Python that imports "
              "stable_baselines3 and torch")
    timeout = args.max_seconds + 120
    ours_runs, sb3_runs = [], []
    for run in range(1, args.runs + 1):
        ours_process = start_side(sys.executable, ours_script)
        if not args.concurrent:
            ours = finish_side("tfrl", ours_process, timeout)
        if have_sb3:
            theirs = finish_side("sb3", start_side(args.sb3_python, sb3_script), timeout)
        if args.concurrent:
            ours = finish_side("tfrl", ours_process, timeout)
        ours_runs.append(ours)
        line = f"run={run} ours_seconds={ours[0]:.1f} ours_env_steps={ours[1]} ours_reached={ours[2]}"
        if have_sb3:
            sb3_runs.append(theirs)
            line += (f" sb3_seconds={theirs[0]:.1f} sb3_env_steps={theirs[1]} sb3_reached={theirs[2]}"
                     f" seconds_ratio={ours[0] / theirs[0]:.2f} steps_ratio={ours[1] / theirs[1]:.2f}")
        print(line, flush=True)
    median = f"median ours_seconds={statistics.median(r[0] for r in ours_runs):.1f}" \
             f" ours_env_steps={statistics.median(r[1] for r in ours_runs):.0f}"
    if sb3_runs:
        ours_s, sb3_s = statistics.median(r[0] for r in ours_runs), statistics.median(r[0] for r in sb3_runs)
        ours_n, sb3_n = statistics.median(r[1] for r in ours_runs), statistics.median(r[1] for r in sb3_runs)
        median += (f" sb3_seconds={sb3_s:.1f} sb3_env_steps={sb3_n:.0f}"
                   f" seconds_ratio={ours_s / sb3_s:.2f} steps_ratio={ours_n / sb3_n:.2f}")
    print(median, flush=True)


if __name__ == "__main__":
    main()
