"""Learning from recorded experience: BC and MARWIL from 100 CartPole episodes of a trained PPO.

    python tools/bench_offline.py [--workdir DIR] [--max-seconds 900] [--episodes 100]

Trains the tuned `cartpole-ppo` example until its stop reward (skipped when DIR already holds a
recording), records `--episodes` greedy episodes of it with the same code path as
`tfrl rollout CKPT --out DIR`, then trains the tuned `cartpole-bc` and `cartpole-marwil`
examples on the recording. Prints one line per stage: the recorded episodes' mean return, and
for BC and MARWIL the greedy mean return of 100 fresh evaluation episodes when the example's
stop criterion (greedy mean over its evaluation episodes >= 450) first held, or the best one
within the iteration budget.
"""
import argparse
import copy
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def record(workdir: str, episodes: int, max_seconds: float) -> str:
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file

    experiment = load_experiment_file("cartpole-ppo")
    trainer = get_trainer_class("PPO")(config=experiment["config"], env=experiment["env"])
    started = time.time()
    try:
        while True:
            result = trainer.train()
            if result["episode_reward_mean"] >= experiment["stop"]["episode_reward_mean"] or \
                    time.time() - started > max_seconds:
                break
        checkpoint = trainer.save(os.path.join(workdir, "ppo-checkpoints"))
    finally:
        trainer.stop()
    from tfrl.offline.recording import record_episodes
    from tfrl.trainer import Trainer

    recorder = Trainer.from_checkpoint(
        checkpoint, num_workers=0, num_envs_per_worker=1, output=os.path.join(workdir, "data"),
        batch_mode="complete_episodes", rollout_fragment_length=1, explore=False)
    try:
        returns = record_episodes(recorder.workers.local_worker(), episodes)
    finally:
        recorder.stop()
    return (f"record ppo_env_steps={result['timesteps_total']} ppo_mean={result['episode_reward_mean']:.1f} "
            f"episodes={len(returns)} recorded_greedy_mean={sum(returns) / len(returns):.1f}")


def learn(name: str, workdir: str, max_seconds: float) -> str:
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file, stop_reached

    experiment = load_experiment_file(name)
    config = copy.deepcopy(experiment["config"])
    config["input"] = os.path.join(workdir, "data")
    trainer = get_trainer_class(experiment["run"])(config=config, env=experiment["env"])
    started = time.time()
    try:
        best, reached = float("-inf"), None
        while reached is None and time.time() - started < max_seconds:
            result = trainer.train()
            if "evaluation" in result:
                best = max(best, result["evaluation"]["episode_reward_mean"])
            reached = stop_reached(result, experiment["stop"])
        trainer.config["evaluation_num_episodes"] = 100
        final = trainer._evaluate()["episode_reward_mean"]  # noqa: SLF001 - 100 fresh greedy episodes
    finally:
        trainer.stop()
    return (f"{name} run={experiment['run']} stop={'reached' if reached else 'NOT_REACHED'} "
            f"iterations={result['training_iteration']} rows_trained={result['timesteps_total']} "
            f"best_eval_mean={best:.1f} greedy_mean_100_episodes={final:.1f} "
            f"seconds={time.time() - started:.1f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="bench-offline")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.workdir, "data")):
        print(record(args.workdir, args.episodes, args.max_seconds), flush=True)
    for name in ("cartpole-bc", "cartpole-marwil"):
        print(learn(name, args.workdir, args.max_seconds), flush=True)


if __name__ == "__main__":
    main()
