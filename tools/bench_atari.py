"""Env frames per second, replay compression and the return curve of IMPALA (and Ape-X) on Pong
(ALE/Pong-v5 through tfrl.env.atari), through the full path: Ray rollout workers, frames written
lz4-compressed into replay, the learner thread.

    python tools/bench_atari.py [--algo impala] [--algo apex] [--seconds 120] [--workers 2]

IMPALA runs the tuned example pong-impala (`--workers` / `--envs-per-worker` override its
worker counts); Ape-X runs a small Ape-X DQN configuration with the same conv net. Prints a
`curve` line per training iteration (seconds since construction, env steps, mean return of the
last 100 episodes, episodes so far) and one summary line per algorithm: env frames (agent
steps; each is 4 emulator frames) per second after the first iteration, the compression ratio
of the replay table (raw / stored bytes of its chunks), the stored bytes per step of the `obs`
and `new_obs` columns (the same frames written twice), and the machine's load average.
Needs the Atari extra: pip install "tfrl[atari]".
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ENV = "ALE/Pong-v5"


def impala_trainer(args):
    from tfrl.agents.impala import ImpalaTrainer
    from tfrl.cli import load_experiment_file

    experiment = load_experiment_file("pong-impala")
    config = dict(experiment["config"], num_workers=args.workers,
                  num_envs_per_worker=args.envs_per_worker, min_iter_time_s=args.iter_seconds)
    return ImpalaTrainer(config=config, env=experiment["env"])


def apex_trainer(args):
    from tfrl.agents.dqn import ApexTrainer

    return ApexTrainer(env=ENV, config={
        "num_workers": args.workers, "num_envs_per_worker": args.envs_per_worker,
        "rollout_fragment_length": 50, "num_replay_shards": args.shards,
        "buffer_size": 50000, "learning_starts": 2000, "train_batch_size": 32,
        "target_network_update_freq": 50000, "max_weight_sync_delay": 50,
        "learner_steps_per_call": 4, "timesteps_per_iteration": 1000,
        "min_iter_time_s": args.iter_seconds, "lr": 1e-4, "hiddens": [256], "n_step": 3,
        "model": {"conv_filters": [[16, [8, 8], 4], [32, [4, 4], 2], [64, [3, 3], 1]],
                  "post_fcnet_hiddens": [256]}})


TRAINERS = {"impala": impala_trainer, "apex": apex_trainer}


def run(algo: str, args) -> str:
    built = time.time()
    trainer = TRAINERS[algo](args)
    try:
        result = trainer.train()
        start, start_steps = time.time(), result["timesteps_total"]
        while True:
            print(f"curve algo={algo} seconds={time.time() - built:.0f} "
                  f"env_steps={result['timesteps_total']} "
                  f"episode_reward_mean={result['episode_reward_mean']:.2f} "
                  f"episodes_total={result.get('episodes_total', 0)}", flush=True)
            if time.time() - start >= args.seconds:
                break
            result = trainer.train()
        rate = (result["timesteps_total"] - start_steps) / (time.time() - start)
        replay = result["info"].get("replay") or {}
        columns = replay.get("column_bytes", {})
        # steps stored = raw bytes of the obs column / bytes of one stacked uint8 observation
        obs_bytes = int(np.prod(trainer.get_policy().observation_space.shape))
        steps = replay.get("column_raw_bytes", {}).get("obs", 0) / obs_bytes
        per_step = {name: columns.get(name, 0) / steps if steps else float("nan")
                    for name in ("obs", "new_obs")}
        return (f"algo={algo} env={ENV} workers={args.workers} "
                f"envs_per_worker={args.envs_per_worker} env_frames_per_s={rate:.0f} "
                f"compression_ratio={replay.get('compression_ratio', float('nan')):.1f} "
                f"obs_bytes_per_step={per_step['obs']:.0f} "
                f"new_obs_bytes_per_step={per_step['new_obs']:.0f} "
                f"env_steps={result['timesteps_total']} "
                f"trained_steps={result['info'].get('num_steps_trained', 0)} "
                f"episode_reward_mean={result['episode_reward_mean']:.2f} "
                f"load_avg_1m={os.getloadavg()[0]:.1f}")
    finally:
        trainer.stop()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", choices=sorted(TRAINERS), action="append",
                        help="algorithm(s) to measure (default: impala)")
    parser.add_argument("--seconds", type=float, default=120.0,
                        help="measured time per algorithm, after the first iteration")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs-per-worker", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2, help="replay shards (Ape-X)")
    parser.add_argument("--iter-seconds", type=float, default=10.0,
                        help="min_iter_time_s: seconds per training iteration (curve points)")
    args = parser.parse_args(argv)
    from tfrl.runtime import ensure_ray

    ensure_ray({})
    for algo in args.algo or ["impala"]:
        print(run(algo, args), flush=True)


if __name__ == "__main__":
    main()
