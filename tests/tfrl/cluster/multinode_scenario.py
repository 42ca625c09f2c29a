"""A training run on a real multi-node Ray (`ray.cluster_utils.Cluster`: separate raylets, real
object transfer), run in a process of its own so it does not meet the test session's local Ray.

Nodes: the head (the driver, hence the learner, with {"learner": 1}), a replay node
({"replay": 1}) and two rollout nodes ({"rollout": 2} each). PPO trains with its worker on a rollout
node, its replay server an actor on the replay node (listening on the node's address, with a
token and TLS), its learner on the head. Then the worker's rollout node is removed and PPO
trains on: the worker is recreated on the other rollout node with the current weights. Last, DQN
trains with the same placement. What each step saw is written as JSON to the path given as the
only argument, for tests/tfrl/cluster/test_multinode.py to check.

    python -m tests.tfrl.cluster.multinode_scenario OUT.json
"""
import datetime
import json
import os
import sys
import tempfile
import time

import numpy as np

SMALL = {"num_workers": 1, "num_envs_per_worker": 2, "num_cpus_per_worker": 1,
         "model": {"fcnet_hiddens": [16]}, "seed": 1, "tf_threads_per_worker": 1,
         "driver_tf_threads": 1, "num_learner_devices": 1,
         "custom_resources_per_worker": {"rollout": 1}, "learner_resources": {"learner": 1},
         "replay_resources": {"replay": 1}, "replay_bind_address": "node"}
PPO = dict(SMALL, rollout_fragment_length=16, train_batch_size=64, sgd_minibatch_size=32,
           num_sgd_iter=2)
DQN = dict(SMALL, rollout_fragment_length=4, train_batch_size=16, learning_starts=32,
           timesteps_per_iteration=64, buffer_size=1000)
# Ray notices a dead node after health_check_failure_threshold missed checks: a removed node
# (its raylet gone, each check refused at once) within about 10 s. A live raylet on the loaded
# 2-core machine has missed 5 checks of 3 s in a row while a worker imported TensorFlow beside
# it, so a check may take 5 s and 10 may be missed.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000,
                      "health_check_failure_threshold": 10, "health_check_timeout_ms": 5000}


def certificate_for(ip: str):
    """(certificate PEM, key PEM): self-signed, for `ip` (a TLS client checks the address)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ip)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def stage_marker():
    """mark(what): prints `what` with the seconds since this call (the scenario's progress log)."""
    start = time.time()

    def mark(what):
        print(f"[{time.time() - start:6.1f}s] {what}", flush=True)

    return mark


def exit_at_once() -> None:
    """Ends the scenario's process once its JSON is written, without the interpreter's teardown:
    finalizing the native objects TensorFlow and Ray left took 1.5 to 11 s after a scenario (in
    C++, with the GIL held, no Python frame), and nothing the test checks happens there (the
    trainers were stopped, Ray and the cluster shut down; tests/conftest.py ends the test
    processes the same way)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def head_only_cluster():
    """A `ray.cluster_utils.Cluster` with its head: the driver's node, {"learner": 1}, no CPUs."""
    from ray.cluster_utils import Cluster

    return Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "resources": {"learner": 1}, "include_dashboard": False,
        "_system_config": FAST_HEALTH_CHECKS})


def secured_replay_config(directory: str, ip: str) -> dict:
    """Writes a replay token and a certificate for `ip` into `directory`; returns the config
    keys that make the trainer's replay servers demand the token and serve TLS."""
    cert, key = certificate_for(ip)
    for name, data in (("token", b"cluster-token\n"), ("cert.pem", cert), ("key.pem", key)):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return {"replay_token_file": os.path.join(directory, "token"),
            "replay_tls_certificate_file": os.path.join(directory, "cert.pem"),
            "replay_tls_private_key_file": os.path.join(directory, "key.pem")}


def placement(trainer) -> dict:
    import ray

    replay = trainer.replay
    return {"workers": trainer.workers.worker_node_ids(),
            "replay": ray.get(replay.server_actor.node_id.remote()),
            "learner": ray.get_runtime_context().get_node_id(),
            "replay_address": replay.address}


def same_weights(a: dict, b: dict) -> bool:
    return all(len(a[pid]) == len(b[pid]) and all(np.array_equal(x, y) for x, y in zip(a[pid], b[pid]))
               for pid in a)


def remote_weights(trainer) -> list:
    return trainer.workers.foreach_worker(lambda w: w.get_weights(), local_worker=False)


def main(out_path: str) -> None:
    import ray

    from tfrl.agents.dqn.dqn import DQNTrainer
    from tfrl.agents.ppo.ppo import PPOTrainer

    seen = {}
    mark = stage_marker()
    cluster = head_only_cluster()
    try:
        # every node joins before anything runs: Cluster.add_node forks the new raylet from
        # this process, and a fork while the driver's gRPC threads are busy has crashed the new
        # raylet at start
        replay_node = cluster.add_node(num_cpus=0, resources={"replay": 1})
        rollout_nodes = {n.node_id: n for n in
                         (cluster.add_node(num_cpus=1, resources={"rollout": 2}) for _ in range(2))}
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        ip = ray.util.get_node_ip_address()
        mark("cluster up")
        seen["nodes"] = {"head": cluster.head_node.node_id, "replay": replay_node.node_id,
                         "ip": ip}
        secured = secured_replay_config(tempfile.mkdtemp(), ip)

        ppo = PPOTrainer(env="CartPole-v1", config=dict(PPO, **secured))
        try:
            mark("ppo built")
            initial = ppo.workers.local_worker().get_weights()
            first = ppo.train()
            mark("ppo trained")
            seen["ppo"] = dict(placement(ppo), trained=first["info"]["num_steps_trained"],
                               failures=first["num_worker_failures_this_iter"],
                               inserts=ppo.replay.client().server_info()["rollouts"].num_inserts)
            # the rollout node of the worker is lost between two iterations; the other one stays
            (worker_node,) = seen["ppo"]["workers"]
            seen["nodes"]["rollout"] = worker_node if worker_node in rollout_nodes else None
            (seen["nodes"]["new_rollout"],) = set(rollout_nodes) - {worker_node}
            cluster.remove_node(rollout_nodes[worker_node])
            mark("node removed")
            # the weights the learner has when the next iteration starts (and finds the loss)
            current = ppo.workers.local_worker().get_weights()
            after = ppo.train()
            mark("ppo trained after the loss")
            seen["ppo_after_loss"] = dict(
                placement(ppo), trained=after["info"]["num_steps_trained"],
                failures=after["num_worker_failures_this_iter"],
                failures_total=after["num_worker_failures_total"],
                healthy=after["num_healthy_workers"],
                learned_before_loss=not same_weights(initial, current),
                recreated_with_current_weights=all(
                    same_weights(current, w) for w in remote_weights(ppo)))
        finally:
            ppo.stop()

        dqn = DQNTrainer(env="CartPole-v1", config=DQN)
        try:
            mark("dqn built")
            results = [dqn.train() for _ in range(2)]
            mark("dqn trained")
            seen["dqn"] = dict(placement(dqn), trained=results[-1]["info"]["num_steps_trained"],
                               sampled=results[-1]["info"]["num_steps_sampled"],
                               failures=results[-1]["num_worker_failures_total"])
        finally:
            dqn.stop()
    finally:
        ray.shutdown()
        cluster.shutdown()
    with open(out_path, "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main(sys.argv[1])
    exit_at_once()
