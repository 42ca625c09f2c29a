"""The `tfrl` command: `tfrl train`, `tfrl rollout` (`--out DIR` records) and `tfrl export`.

`tfrl train` builds a trainer from `--run`/`--env`/`--config` or a tuned-example YAML (`-f`),
trains until a `--stop` criterion holds, shows one progress row per iteration, writes TensorBoard
events under `<logdir>/<experiment>/`, checkpoints every `--checkpoint-freq` iterations and on
Ctrl-C, exports the final policy as a SavedModel and prints where everything is.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from typing import Any, Dict, List, Optional

import yaml

TUNED_EXAMPLES_DIR = os.path.join(os.path.dirname(__file__), "tuned_examples")


def _json_arg(text: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


class _ExperimentLoader(yaml.SafeLoader):
    """PyYAML's safe loader reading `1e-4` as a float, as YAML 1.2 and JSON do (PyYAML's YAML 1.1
    rules need a dot, `1.0e-4`, and would hand the typed settings a string)."""


_ExperimentLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+][0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def load_experiment_file(path: str) -> Dict[str, Any]:
    """Reads a tuned-example YAML: {name: {run, env, stop, config}} or the inner dict itself.
    A bare name (e.g. `cartpole-ppo`) is looked up among the shipped tuned examples."""
    if not os.path.exists(path):
        shipped = os.path.join(TUNED_EXAMPLES_DIR, path if path.endswith(".yaml") else f"{path}.yaml")
        if not os.path.exists(shipped):
            raise SystemExit(f"tfrl: no experiment file {path!r} (shipped examples: "
                             f"{', '.join(sorted(os.listdir(TUNED_EXAMPLES_DIR)))})")
        path = shipped
    with open(path, encoding="utf-8") as f:
        data = yaml.load(f, Loader=_ExperimentLoader)
    if isinstance(data, dict) and len(data) == 1 and "run" not in data:
        data = next(iter(data.values()))
    return data


def stop_reached(result: Dict[str, Any], stop: Dict[str, Any]) -> Optional[str]:
    """The first stop criterion the result meets (`key >= value`), or None; a key may name a
    nested result with slashes (`evaluation/episode_reward_mean`)."""
    for key, value in stop.items():
        current = result
        for part in key.split("/"):
            current = current.get(part) if isinstance(current, dict) else None
        if current is not None and current == current and current >= value:
            return f"{key}={current:.6g} >= {value}"
    return None


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfrl", description="Train, roll out and export tfrl policies.")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's, absl's and Ray's start-up messages")

    train = sub.add_parser("train", parents=[common], help="train an algorithm on an environment")
    train.add_argument("--run", help="algorithm: PG, A2C, A3C, PPO, DQN, APEX, IMPALA, APPO, DDPG, "
                                     "TD3, SAC, MARWIL, BC, CQL, ES or ARS")
    train.add_argument("--env", help="gymnasium environment id, e.g. CartPole-v1")
    train.add_argument("-f", "--file", help="tuned example YAML (path or shipped name)")
    train.add_argument("--config", type=_json_arg, default={}, help="config overrides as JSON")
    train.add_argument("--stop", type=_json_arg, default=None,
                       help='stop criteria as JSON, e.g. \'{"episode_reward_mean": 450}\'')
    train.add_argument("--num-workers", type=int, default=None)
    train.add_argument("--checkpoint-freq", type=int, default=0, help="checkpoint every K iterations")
    train.add_argument("--logdir", default="logs", help="root of the experiment directories")
    train.add_argument("--experiment", default=None, help="experiment name (default: RUN_ENV_TIME)")
    train.add_argument("--ray-address", default=None)
    train.add_argument("--replay-address", default=None)
    train.add_argument("--replay-token-file", default=None,
                       help="file holding the access token of the replay server at --replay-address")
    train.add_argument("--replay-root-certificates", default=None,
                       help="PEM certificate to trust for TLS to the replay server at --replay-address")
    train.add_argument("--restore", default=None, help="checkpoint to resume from")

    rollout = sub.add_parser("rollout", parents=[common], help="run a trained policy from a checkpoint")
    rollout.add_argument("checkpoint")
    rollout.add_argument("--episodes", type=int, default=10)
    rollout.add_argument("--explore", action="store_true", help="sample actions instead of the mode")
    rollout.add_argument("--out", default=None,
                         help="record the episodes (with their action probabilities) into this "
                              "directory, as `output` does; `input: DIR` reads them back")
    rollout.add_argument("--output-format", default="tfrecord", choices=["tfrecord", "json"])

    export = sub.add_parser("export", parents=[common], help="export a checkpoint's policy as a SavedModel")
    export.add_argument("checkpoint")
    export.add_argument("export_dir")
    return parser


def _trainer_from_checkpoint(checkpoint: str, **overrides):
    from tfrl.trainer import Trainer

    return Trainer.from_checkpoint(checkpoint, **overrides)


def cmd_train(args) -> int:
    from tfrl.registry import get_trainer_class
    from tfrl.logging import ProgressDisplay

    experiment = load_experiment_file(args.file) if args.file else {}
    run = args.run or experiment.get("run")
    env = args.env or experiment.get("env")
    if not run or not env:
        raise SystemExit("tfrl train: give --run and --env (or -f with a tuned example)")
    config = dict(experiment.get("config", {}))
    config.update(args.config)
    if args.num_workers is not None:
        config["num_workers"] = args.num_workers
    if args.ray_address:
        config["ray_address"] = args.ray_address
    if args.replay_address:
        config["replay_address"] = args.replay_address
    if args.replay_token_file:
        config["replay_token_file"] = args.replay_token_file
    if args.replay_root_certificates:
        config["replay_root_certificates"] = args.replay_root_certificates
    stop = args.stop if args.stop is not None else experiment.get("stop", {"training_iteration": 100})

    name = args.experiment or f"{run}_{env}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    logdir = os.path.abspath(os.path.join(args.logdir, name))
    # this process is the learner's own: its replay streams reuse freed memory (replay.heap_policy)
    from replay.heap_policy import keep_freed_heap_memory

    keep_freed_heap_memory()
    display = ProgressDisplay(title=f"{run} on {env} -> {logdir}")
    trainer = get_trainer_class(run)(config=config, env=env, logdir=logdir)
    if args.restore:
        trainer.restore(args.restore)
    checkpoint = None
    reason = None
    try:
        while reason is None:
            result = trainer.train()
            display.update(result)
            if args.checkpoint_freq and trainer.iteration % args.checkpoint_freq == 0:
                checkpoint = trainer.save(os.path.join(logdir, "checkpoints"))
            reason = stop_reached(result, stop)
        display.message(f"stopped: {reason}")
    except KeyboardInterrupt:
        display.message("interrupted: saving a checkpoint")
    finally:
        try:
            checkpoint = trainer.save(os.path.join(logdir, "checkpoints"))
            export_dir = trainer.export_policy_model(os.path.join(logdir, "exported_model"))
            display.message(f"logs (TensorBoard: tensorboard --logdir {args.logdir}): {logdir}")
            display.message(f"checkpoint: {os.path.dirname(checkpoint)}")
            display.message(f"exported SavedModel: {export_dir}")
        finally:
            trainer.stop()
    return 0


def cmd_rollout(args) -> int:
    from tfrl.env.registry import EnvContext, resolve_env_creator

    if args.out:
        return _record_episodes(args)

    trainer = _trainer_from_checkpoint(args.checkpoint, num_workers=0)
    try:
        # the env the workers trained on (registered names, Atari preprocessing)
        env = resolve_env_creator(trainer.config["env"])(
            EnvContext(trainer.config.get("env_config") or {}))
        returns: List[float] = []
        for episode in range(args.episodes):
            obs, _ = env.reset(seed=episode)
            done, total = False, 0.0
            while not done:
                action = trainer.compute_action(obs, explore=args.explore)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
            print(f"episode {episode}: return {total:.1f}")
        print(f"mean return over {len(returns)} episodes: {sum(returns) / len(returns):.1f}")
    finally:
        trainer.stop()
    return 0


def _record_episodes(args) -> int:
    """`tfrl rollout CKPT --out DIR`: plays whole episodes in the driver's rollout worker, which
    records every step (the policy's action probabilities included) into DIR."""
    trainer = _trainer_from_checkpoint(
        args.checkpoint, num_workers=0, num_envs_per_worker=1, input="sampler",
        output=args.out, output_format=args.output_format, batch_mode="complete_episodes",
        rollout_fragment_length=1, explore=bool(args.explore), evaluation_interval=None)
    from tfrl.offline.recording import record_episodes

    try:
        worker = trainer.workers.local_worker()
        returns = record_episodes(
            worker, args.episodes,
            on_episode=lambda index, episode_return: print(f"episode {index}: return "
                                                           f"{episode_return:.1f}"))
        print(f"mean return over {len(returns)} episodes: {sum(returns) / len(returns):.1f}")
        print(f"recorded into {os.path.abspath(args.out)}: "
              f"{', '.join(os.path.basename(p) for p in worker.output_writer.files_written)}")
    finally:
        trainer.stop()
    return 0


def cmd_export(args) -> int:
    trainer = _trainer_from_checkpoint(args.checkpoint, num_workers=0)
    try:
        print(f"exported SavedModel: {trainer.export_policy_model(args.export_dir)}")
    finally:
        trainer.stop()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = _build_parser().parse_args(argv)
    stderr_filter = None
    if not args.verbose:
        from tfrl.startup_noise import quiet_startup

        stderr_filter = quiet_startup()
    try:
        return {"train": cmd_train, "rollout": cmd_rollout, "export": cmd_export}[args.command](args)
    finally:
        if stderr_filter is not None:
            stderr_filter.stop()


def run() -> None:
    """The `tfrl` command (`python -m tfrl.cli`): `main`, then Ray shut down, the logs and
    output flushed, and the process ended without the interpreter's teardown of TensorFlow's
    native objects (1.5-2 s after every command, checking nothing)."""
    try:
        code = main()
    except SystemExit as e:  # argparse's --help and usage errors
        code = e.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as sys.exit does with a message
        print(code, file=sys.stderr)
        code = 1
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
