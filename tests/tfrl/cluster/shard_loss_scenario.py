"""Ape-X on a real multi-node Ray (`ray.cluster_utils.Cluster`) losing the node of a replay shard,
run in a process of its own so it does not meet the test session's local Ray.

Nodes: the head (the driver and learner, {"learner": 1}), a rollout node ({"rollout": 1}) and
three replay nodes ({"replay": 1} each). Ape-X starts two shards (one per replay node it gets),
listening on their nodes' addresses with a token and TLS, checkpointing into a directory every
node reaches; after some training the node of shard 1 is removed and training goes on: the
shard is restarted on the spare replay node from its checkpoint. What each step saw is written
as JSON to the path given as the only argument, for tests/tfrl/cluster/test_shard_loss.py.

    python -m tests.tfrl.cluster.shard_loss_scenario OUT.json
"""
import dataclasses
import json
import os
import sys
import tempfile

from tests.tfrl.cluster.multinode_scenario import (exit_at_once, head_only_cluster,
                                                   secured_replay_config, stage_marker)

APEX = {"num_workers": 1, "num_envs_per_worker": 1, "num_cpus_per_worker": 1,
        "rollout_fragment_length": 16, "learning_starts": 64, "train_batch_size": 16,
        "timesteps_per_iteration": 96, "min_iter_time_s": 0, "buffer_size": 50000,
        "target_network_update_freq": 64, "max_weight_sync_delay": 2,
        "learner_steps_per_call": 2, "num_replay_shards": 2, "hiddens": [16],
        "model": {"fcnet_hiddens": [16]}, "seed": 3, "tf_threads_per_worker": 1,
        "driver_tf_threads": 1, "num_learner_devices": 1,
        "custom_resources_per_worker": {"rollout": 1}, "learner_resources": {"learner": 1},
        "replay_resources": {"replay": 1}, "replay_bind_address": "node",
        "replay_shard_check_interval_s": 1.0, "replay_shard_checkpoint_interval_s": 1.0}


def main(out_path: str) -> None:
    import ray

    from replay.checkpoint import Checkpointer
    from tfrl.agents.dqn import ApexTrainer
    from tfrl.optimizers.async_replay_optimizer import REPLAY_TABLE

    seen = {}
    mark = stage_marker()
    cluster = head_only_cluster()
    try:
        cluster.add_node(num_cpus=1, resources={"rollout": 1})
        # all three replay nodes join before anything runs: Cluster.add_node forks the new
        # raylet from this process, and a fork while the driver's gRPC threads are busy (the
        # writers', the learner's) has crashed the new raylet at start
        replay_nodes = {n.node_id: n for n in
                        (cluster.add_node(num_cpus=0, resources={"replay": 1}) for _ in range(3))}
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        ip = ray.util.get_node_ip_address()
        mark("cluster up")
        shared = tempfile.mkdtemp()
        config = dict(APEX, replay_shard_checkpoint_dir=os.path.join(shared, "shards"),
                      **secured_replay_config(shared, ip))
        trainer = ApexTrainer(env="CartPole-v1", config=config)
        try:
            optimizer = trainer.optimizer

            def shard_nodes():
                return [ray.get(a.node_id.remote(), timeout=30) for a in optimizer.shards._actors]

            for _ in range(3):
                trainer.train()
            mark("apex trained")
            before = shard_nodes()
            seen["before"] = {"shard_nodes": before, "addresses": list(optimizer.shards.addresses),
                              "trained": optimizer.num_steps_trained,
                              "replay_nodes": sorted(replay_nodes), "ip": ip}
            # the last checkpoint of shard 1 before its loss, and the keys of its items
            optimizer.settings = dataclasses.replace(optimizer.settings,
                                                     replay_shard_checkpoint_interval_s=3600.0)
            optimizer.shards.checkpoint([1])
            saved = Checkpointer(os.path.join(shared, "shards", "shard_1")).load_latest()
            saved_keys = {item.key for item in
                          {t.name: t for t in saved}[REPLAY_TABLE].checkpoint()[1]}
            # the node of shard 1 is lost; the spare is the replay node without a shard
            (spare,) = set(replay_nodes) - set(before)
            cluster.remove_node(replay_nodes[before[1]])
            mark("shard node removed")
            updates = optimizer.priority_updates_per_shard[1]
            trained = optimizer.num_steps_trained
            iterations = 0
            while iterations < 60:
                result = trainer.train()
                iterations += 1
                if (optimizer.num_shard_restarts and optimizer.num_steps_trained > trained
                        and optimizer.priority_updates_per_shard[1] > updates):
                    break
            mark(f"apex trained after the loss ({iterations} iterations)")
            info = result["info"]
            sampled = optimizer.shards.client(1).sample(REPLAY_TABLE, num_samples=500, timeout=30,
                                                        emit_timesteps=False)
            seen["after"] = {"restored_keys": len({int(x.info.key) for x in sampled} & saved_keys),
                             "saved_keys": len(saved_keys), "shard_nodes": shard_nodes(), "spare": spare,
                             "addresses": list(optimizer.shards.addresses),
                             "failures": info["num_replay_shard_failures"],
                             "restarts": info["num_replay_shard_restarts"],
                             "live": info["num_replay_shards_live"],
                             "trained": optimizer.num_steps_trained,
                             "priority_updates_grew": optimizer.priority_updates_per_shard[1] > updates,
                             "worker_addresses": ray.get([
                                 w.apply.remote(lambda wk: [c.address for c in wk.replay_output.clients])
                                 for w in trainer.workers.remote_workers()])}
        finally:
            trainer.stop()
    finally:
        ray.shutdown()
        cluster.shutdown()
    with open(out_path, "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main(sys.argv[1])
    exit_at_once()
