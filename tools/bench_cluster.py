"""PPO on a multi-node Ray (`ray.cluster_utils.Cluster`: a head and raylets of their own on this
machine): env steps/s and learner samples/s with both rollout workers on the head against one
worker on each of two other nodes, and the time to recover from losing a worker's node.

    python tools/bench_cluster.py [--seconds 20] [--repeats 1] [--fast-health-checks]

Prints one line per case (and the load average, since the figures depend on what else runs):
  layout=head   both workers on the head (the driver's node, where the learner runs)
  layout=split  one worker on each of two rollout nodes
  recovery      a rollout node is removed between two iterations; the time from the removal until
                the next iteration has completed with the worker recreated on a spare node.

The learner and the replay server (bound to the node's address) stay in the driver on the head in
every case; the config is the shipped cartpole-ppo tuned example's (2 workers x 4 envs). Ray's
default health checks are used unless --fast-health-checks (the multi-node test's settings),
which decide how soon Ray declares a removed node dead.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Ray declares a node dead after health_check_failure_threshold missed checks
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 300,
                      "health_check_failure_threshold": 3, "health_check_timeout_ms": 300}
OBJECT_STORE_BYTES = 100 * 1024 * 1024


def ppo_config(slot: str) -> dict:
    """The cartpole-ppo tuned example with each worker taking one `slot` resource."""
    from tfrl.cli import load_experiment_file

    config = dict(load_experiment_file("cartpole-ppo")["config"])
    config.update({"custom_resources_per_worker": {slot: 1}, "num_cpus_per_worker": 1,
                   "learner_resources": {"learner": 1}, "replay_bind_address": "node"})
    return config


def rates(trainer, seconds: float):
    """(env steps sampled / s, samples the learner trained on / s) over `seconds`, after one
    warm-up iteration."""
    trainer.train()
    optimizer = trainer.optimizer
    sampled, trained, start = optimizer.num_steps_sampled, optimizer.num_steps_trained, time.time()
    while time.time() - start < seconds:
        trainer.train()
    elapsed = time.time() - start
    return ((optimizer.num_steps_sampled - sampled) / elapsed,
            (optimizer.num_steps_trained - trained) / elapsed)


def node_names(trainer, names: dict) -> str:
    return ",".join(names.get(n, n[:8]) for n in trainer.workers.worker_node_ids())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured time per layout")
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure the two layouts this many times, alternating (the load of "
                             "a shared machine drifts)")
    parser.add_argument("--fast-health-checks", action="store_true",
                        help="declare a lost node dead after ~1 s instead of Ray's default")
    args = parser.parse_args(argv)

    import ray
    from ray.cluster_utils import Cluster

    from tfrl.agents.ppo.ppo import PPOTrainer

    health = "fast" if args.fast_health_checks else "ray-default"
    head_args = {"num_cpus": 2, "resources": {"learner": 1, "head_slot": 2},
                 "object_store_memory": OBJECT_STORE_BYTES, "include_dashboard": False}
    if args.fast_health_checks:
        head_args["_system_config"] = FAST_HEALTH_CHECKS
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    try:
        rollout = [cluster.add_node(num_cpus=1, resources={"split_slot": 1},
                                    object_store_memory=OBJECT_STORE_BYTES) for _ in range(2)]
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        names = {cluster.head_node.node_id: "head", rollout[0].node_id: "node1",
                 rollout[1].node_id: "node2"}

        layouts = (("head", "head_slot"), ("split", "split_slot")) * max(1, args.repeats)
        for layout, slot in layouts:
            trainer = PPOTrainer(env="CartPole-v1", config=ppo_config(slot))
            try:
                env_rate, learner_rate = rates(trainer, args.seconds)
                print(f"case=ppo layout={layout} workers@{node_names(trainer, names)} "
                      f"env_steps_per_s={env_rate:.0f} learner_samples_per_s={learner_rate:.0f} "
                      f"load_avg_1m={os.getloadavg()[0]:.1f}", flush=True)
            finally:
                trainer.stop()

        trainer = PPOTrainer(env="CartPole-v1", config=ppo_config("split_slot"))
        try:
            trainer.train()
            spare = cluster.add_node(num_cpus=1, resources={"split_slot": 1},
                                     object_store_memory=OBJECT_STORE_BYTES)
            names[spare.node_id] = "spare"
            cluster.wait_for_nodes()
            removed = time.time()
            cluster.remove_node(rollout[0])
            iterations = 0
            result = trainer.train()
            iterations += 1
            while result["num_worker_failures_total"] == 0:  # the loss not yet seen
                result = trainer.train()
                iterations += 1
            recovered = time.time() - removed
            print(f"case=ppo recovery health_checks={health} "
                  f"workers@{node_names(trainer, names)} seconds_to_next_iteration={recovered:.1f} "
                  f"iterations={iterations} worker_failures={result['num_worker_failures_total']} "
                  f"load_avg_1m={os.getloadavg()[0]:.1f}", flush=True)
        finally:
            trainer.stop()
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
