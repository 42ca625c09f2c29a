"""Trainers on a real multi-node Ray: each component where its resources put it, and a node lost.

The cluster (`ray.cluster_utils.Cluster`: a head and raylets of their own) runs in a subprocess,
tests/tfrl/cluster/multinode_scenario.py, so it never meets the session's local Ray; this test
checks what the scenario recorded. Placement and config errors that need no cluster are checked
on the session's Ray.
"""
import json
import os

import pytest

from tests.tfrl.cluster.scenario_process import run_scenario

from tfrl import errors
from tfrl.replay_hosting import LOOPBACK, ReplayHosting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    out = tmp_path_factory.mktemp("multinode") / "seen.json"
    run = run_scenario("tests.tfrl.cluster.multinode_scenario", out, timeout=420)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    return json.loads(out.read_text()), run.stdout + run.stderr


@pytest.mark.timeout(480)
def test_ppo_and_dqn_place_workers_replay_and_learner_on_their_nodes_and_survive_a_node_loss(scenario):
    seen, log = scenario
    nodes = seen["nodes"]
    assert len({nodes["head"], nodes["replay"], nodes["rollout"], nodes["new_rollout"]}) == 4

    ppo = seen["ppo"]
    assert ppo["workers"] == [nodes["rollout"]]
    assert ppo["replay"] == nodes["replay"]
    assert ppo["learner"] == nodes["head"]
    # the address workers and learner dial is the replay node's own, not loopback
    host = ppo["replay_address"].rsplit(":", 1)[0]
    assert host == nodes["ip"] and host != LOOPBACK
    assert ppo["inserts"] == 64 and ppo["trained"] == 128  # written across nodes, learned (2 epochs)
    assert ppo["failures"] == 0

    after = seen["ppo_after_loss"]
    assert after["workers"] == [nodes["new_rollout"]]  # recreated on the node that survived
    assert after["failures"] == 1 and after["failures_total"] == 1 and after["healthy"] == 1
    assert after["learned_before_loss"] and after["recreated_with_current_weights"]
    assert after["trained"] > ppo["trained"]  # the iteration completed with the new worker
    assert "1 rollout worker failure(s); recreated" in log

    dqn = seen["dqn"]
    assert dqn["workers"] == [nodes["new_rollout"]]
    assert dqn["replay"] == nodes["replay"] and dqn["learner"] == nodes["head"]
    assert dqn["replay_address"].rsplit(":", 1)[0] == nodes["ip"]
    assert dqn["sampled"] >= 128 and dqn["trained"] > 0 and dqn["failures"] == 0


@pytest.mark.parametrize("config, complaint", [
    ({"replay_bind_address": "everywhere"}, "replay_bind_address must be"),
    ({"replay_resources": ["replay"], "replay_bind_address": "node"}, "replay_resources must be a dict"),
    ({"replay_resources": {"replay": -1}, "replay_bind_address": "node"}, "must be a number >= 0"),
    ({"replay_resources": {"replay": 1}}, "set replay_bind_address='node'"),
    ({"replay_tls_certificate_file": "cert.pem"}, "go together"),
])
def test_bad_placement_settings_are_refused_with_what_to_do(config, complaint):
    with pytest.raises(errors.InvalidConfigError, match=complaint):
        ReplayHosting.from_config(config)


def test_an_embedded_server_bound_to_the_node_is_reached_at_the_nodes_address(ray_session):
    import ray
    from replay import Table

    from tfrl.replay_hosting import ReplayService

    service = ReplayService({"replay_bind_address": "node"})
    service.add_table(Table.queue("q", 10))
    try:
        address = service.start()
        assert address.rsplit(":", 1)[0] == ray.util.get_node_ip_address() != LOOPBACK
        assert "q" in service.client().server_info()
    finally:
        service.stop()
    default = ReplayService({})
    default.add_table(Table.queue("q", 10))
    try:
        assert default.start().startswith(LOOPBACK + ":")  # the default stays loopback
    finally:
        default.stop()


def test_resources_no_node_offers_are_refused_instead_of_waiting_forever(ray_session):
    from tfrl.agents.pg.pg import PGTrainer
    from tfrl.replay_hosting import ReplayShards

    small = {"num_workers": 1, "num_cpus_per_worker": 0, "rollout_fragment_length": 10,
             "train_batch_size": 10, "model": {"fcnet_hiddens": [8]}}
    with pytest.raises(errors.InvalidConfigError, match="no node of the Ray cluster offers"):
        PGTrainer(env="CartPole-v1", config=dict(small, custom_resources_per_worker={"gpu-box": 1}))
    with pytest.raises(errors.InvalidConfigError, match="learner_resources"):
        PGTrainer(env="CartPole-v1", config=dict(small, learner_resources={"learner": 1}))
    shards = ReplayShards(1, hosting=ReplayHosting.from_config(
        {"replay_resources": {"replay": 1}, "replay_bind_address": "node"}))
    with pytest.raises(errors.InvalidConfigError, match="replay_resources"):
        shards.start()


def test_a_server_actor_that_cannot_start_ends_with_a_named_error_within_its_timeout(ray_session):
    import dataclasses
    import time

    import ray
    from replay import Table

    # the node's own resource, held whole by another actor: feasible, but taken
    node_resource = {f"node:{ray.util.get_node_ip_address()}": 1.0}
    holder = ray.remote(num_cpus=0, resources=node_resource)(_Holder).remote()
    try:
        ray.get(holder.ready.remote(), timeout=60)
        hosting = dataclasses.replace(
            ReplayHosting.from_config({"replay_bind_address": "node", "replay_start_timeout_s": 2}),
            resources=node_resource)
        started = time.monotonic()
        with pytest.raises(errors.ReplayStartTimeoutError, match="replay_start_timeout_s=2 s"):
            hosting.start_actors(1, [Table.queue("q", 10).config()])
        assert time.monotonic() - started < 30
    finally:
        ray.kill(holder)
    with pytest.raises(errors.InvalidConfigError, match="replay_start_timeout_s must be"):
        ReplayHosting.from_config({"replay_start_timeout_s": 0})


class _Holder:
    def ready(self) -> bool:
        return True


def test_a_tune_trial_reserves_learner_resources_and_each_workers_custom_resources():
    from tfrl.agents.ppo.ppo import PPOTrainer
    from tfrl.tune import trainer_resources

    request = trainer_resources(PPOTrainer, {"num_workers": 2, "learner_resources": {"GPU": 1},
                                             "custom_resources_per_worker": {"rollout": 1}})
    assert request.bundles == [{"GPU": 1.0}, {"CPU": 1.0, "rollout": 1.0},
                               {"CPU": 1.0, "rollout": 1.0}]


class _CrashOnceInWorker2:
    """CartPole whose env in rollout worker 2 crashes once, mid-fragment (the marker file makes
    it once per test): that worker dies in the middle of a sampling round, as on a node loss."""

    def __init__(self, ctx):
        import gymnasium as gym

        self._env = gym.make("CartPole-v1")
        self.observation_space, self.action_space = self._env.observation_space, self._env.action_space
        self._crash = ctx.worker_index == 2 and ctx.vector_index == 0 and not os.path.exists(ctx["marker"])
        self._marker, self._steps = ctx["marker"], 0

    def reset(self, *, seed=None, options=None):
        return self._env.reset(seed=seed)

    def step(self, action):
        self._steps += 1
        if self._crash and self._steps == 5:
            open(self._marker, "w").close()
            raise RuntimeError("env crashed")
        return self._env.step(action)


@pytest.mark.timeout(300)
def test_a_worker_lost_mid_round_costs_its_samples_not_the_iteration(ray_session, tmp_path):
    from tfrl.agents.ppo.ppo import PPOTrainer

    config = {"num_workers": 2, "num_envs_per_worker": 1, "num_cpus_per_worker": 0,
              "rollout_fragment_length": 16, "train_batch_size": 64, "sgd_minibatch_size": 16,
              "num_sgd_iter": 1, "model": {"fcnet_hiddens": [8]},
              "env_config": {"marker": str(tmp_path / "crashed")}}
    trainer = PPOTrainer(env=_CrashOnceInWorker2, config=config)
    try:
        result = trainer.train()  # rounds of 32 rows; the one that lost worker 2 has 16: 80 in all
        assert result["num_worker_failures_this_iter"] == 1
        assert result["num_healthy_workers"] == 2
        assert result["info"]["num_steps_trained"] == 80
        assert trainer.train()["num_worker_failures_this_iter"] == 0
    finally:
        trainer.stop()
