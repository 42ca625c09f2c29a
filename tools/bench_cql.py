"""CQL from recorded Pendulum experience: record with a partly trained SAC, then learn offline.

    python tools/bench_cql.py [--workdir DIR] [--sac-steps 3000] [--episodes 250]
        [--max-seconds 1200]

Trains the tuned `pendulum-sac` example for `--sac-steps` env steps (partly trained), records
`--episodes` episodes of it acting by sampling (200 steps each: 50,000 transitions for 250)
with the code path of `tfrl rollout CKPT --explore --out DIR`, then trains the tuned
`pendulum-cql` example on the recording (skipped when DIR/data already holds one). Prints the
recording's mean return, one `curve` line per CQL iteration (rows trained, greedy evaluation
mean over 10 episodes) and a result line: whether the evaluation mean reached -300.
"""
import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def record(workdir: str, sac_steps: int, episodes: int) -> str:
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file
    from tfrl.offline.recording import record_episodes
    from tfrl.trainer import Trainer

    experiment = load_experiment_file("pendulum-sac")
    trainer = get_trainer_class("SAC")(config=experiment["config"], env=experiment["env"])
    try:
        while True:
            result = trainer.train()
            if result["timesteps_total"] >= sac_steps:
                break
        checkpoint = trainer.save(os.path.join(workdir, "sac-checkpoints"))
    finally:
        trainer.stop()
    recorder = Trainer.from_checkpoint(
        checkpoint, num_workers=0, num_envs_per_worker=1, output=os.path.join(workdir, "data"),
        batch_mode="complete_episodes", rollout_fragment_length=1, explore=True)
    try:
        returns = record_episodes(recorder.workers.local_worker(), episodes)
    finally:
        recorder.stop()
    return (f"record sac_env_steps={result['timesteps_total']} sac_mean={result['episode_reward_mean']:.1f} "
            f"episodes={len(returns)} recorded_mean={sum(returns) / len(returns):.1f}")


def learn(workdir: str, max_seconds: float) -> str:
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file, stop_reached

    experiment = load_experiment_file("pendulum-cql")
    config = copy.deepcopy(experiment["config"])
    config["input"] = os.path.join(workdir, "data")
    trainer = get_trainer_class("CQL")(config=config, env=experiment["env"])
    started = time.time()
    try:
        best, reached = float("-inf"), None
        while reached is None and time.time() - started < max_seconds:
            result = trainer.train()
            evaluation = result["evaluation"]["episode_reward_mean"]
            best = max(best, evaluation)
            print(f"curve rows_trained={result['info']['num_steps_trained']} "
                  f"rows_read={result['timesteps_total']} seconds={time.time() - started:.1f} "
                  f"eval_mean={evaluation:.1f}", flush=True)
            reached = stop_reached(result, experiment["stop"])
    finally:
        trainer.stop()
    return (f"pendulum-cql stop={'reached' if reached and best >= -300 else 'NOT_REACHED'} "
            f"iterations={result['training_iteration']} rows_read={result['timesteps_total']} "
            f"best_eval_mean={best:.1f} seconds={time.time() - started:.1f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="bench-cql")
    parser.add_argument("--sac-steps", type=int, default=3000)
    parser.add_argument("--episodes", type=int, default=250)
    parser.add_argument("--max-seconds", type=float, default=1200)
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.workdir, "data")):
        print(record(args.workdir, args.sac_steps, args.episodes), flush=True)
    print(learn(args.workdir, args.max_seconds), flush=True)


if __name__ == "__main__":
    main()
