"""The driver of tools/cluster_demo.sh: trains one shipped tuned example on a running Ray cluster
with its rollout workers and replay server on one node and the learner on this one, checks where
each component ran and that the tuned example's reward target was reached, and prints one line:

    cluster-demo algo=PPO reward=... env_steps=... seconds=... start_seconds=... workers@... replay@... learner@...

(seconds: training, from the first iteration to the stop; start_seconds: building the trainer)

It exits 1 (and says why) when a component ran elsewhere or the target was not reached. Usable on
any Ray cluster whose worker node offers `rollout` and `replay` resources and whose driver node
offers `learner`:

    python tools/cluster_demo_train.py cartpole-ppo --ray-address HEAD:6379 \
        --worker-ip 10.0.0.2 --learner-ip 10.0.0.1 --token-file token \
        --certificate cert.pem --private-key key.pem
"""
import argparse
import json
import sys
import time


def placement_config(args) -> dict:
    """The keys that put rollout workers and the replay server on the node offering `rollout` /
    `replay`, the learner on the one offering `learner`, and secure the replay server."""
    return {"ray_address": args.ray_address,
            "custom_resources_per_worker": {"rollout": 1},
            "learner_resources": {"learner": 1},
            "replay_resources": {"replay": 1}, "replay_bind_address": "node",
            "replay_token_file": args.token_file,
            "replay_tls_certificate_file": args.certificate,
            "replay_tls_private_key_file": args.private_key}


def node_ips() -> dict:
    """Ray node id -> that node's address."""
    import ray

    return {node["NodeID"]: node["NodeManagerAddress"] for node in ray.nodes()}


def where_it_ran(trainer) -> dict:
    """The address of the node of each component: rollout workers, replay server, learner."""
    import ray

    ips = node_ips()
    return {"workers": sorted({ips[n] for n in trainer.workers.worker_node_ids()}),
            "replay": ips[ray.get(trainer.replay.server_actor.node_id.remote())],
            "replay_address": trainer.replay.address,
            "learner": ips[ray.get_runtime_context().get_node_id()]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("example", help="shipped tuned example, e.g. cartpole-ppo")
    parser.add_argument("--ray-address", required=True, help="host:port of the Ray head (GCS)")
    parser.add_argument("--worker-ip", required=True,
                        help="address of the node offering the rollout and replay resources")
    parser.add_argument("--learner-ip", required=True, help="address of this (the driver's) node")
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--certificate", required=True, help="PEM certificate naming --worker-ip")
    parser.add_argument("--private-key", required=True)
    parser.add_argument("--max-seconds", type=float, default=900.0,
                        help="give up after this long (the target then counts as missed)")
    args = parser.parse_args(argv)

    from tfrl.startup_noise import quiet_startup

    quiet_startup()
    from tfrl.registry import get_trainer_class
    from tfrl.cli import load_experiment_file, stop_reached

    experiment = load_experiment_file(args.example)
    stop = dict(experiment["stop"])
    target = stop["episode_reward_mean"]
    config = dict(experiment["config"], **placement_config(args))
    built = time.time()
    trainer = get_trainer_class(experiment["run"])(env=experiment["env"], config=config)
    try:
        started = last_report = time.time()
        result = {}
        while stop_reached(result, stop) is None and time.time() - started < args.max_seconds:
            result = trainer.train()
            if time.time() - last_report >= 10:
                last_report = time.time()
                print(f"  {experiment['run']} iter {result['training_iteration']}: "
                      f"reward {result['episode_reward_mean']:.1f}, "
                      f"{result['timesteps_total']} env steps, {last_report - started:.0f}s",
                      flush=True)
        seconds = time.time() - started
        seen = where_it_ran(trainer)
    finally:
        trainer.stop()

    reward = result.get("episode_reward_mean", float("nan"))
    print(f"cluster-demo algo={experiment['run']} reward={reward:.1f} "
          f"env_steps={result.get('timesteps_total', 0)} seconds={seconds:.0f} "
          f"start_seconds={started - built:.0f} "
          f"workers@{','.join(seen['workers'])} replay@{seen['replay_address']} "
          f"learner@{seen['learner']}", flush=True)
    problems = []
    if seen["workers"] != [args.worker_ip]:
        problems.append(f"rollout workers ran on {seen['workers']}, not on {args.worker_ip}")
    if seen["replay"] != args.worker_ip or seen["replay_address"].rsplit(":", 1)[0] != args.worker_ip:
        problems.append(f"replay server ran on {seen['replay']} at {seen['replay_address']}, "
                        f"not on {args.worker_ip}")
    if seen["learner"] != args.learner_ip:
        problems.append(f"the learner ran on {seen['learner']}, not on {args.learner_ip}")
    if not reward >= target:
        problems.append(f"mean return {reward:.1f} below the target {target} "
                        f"({json.dumps(stop)}, {seconds:.0f}s)")
    for problem in problems:
        print(f"cluster-demo FAILED {experiment['run']}: {problem}", file=sys.stderr, flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
