"""WorkerSet on a real local Ray: weight and filter synchronisation, calls on all workers,
adding workers, replay-writing remote workers, and recovery from killed actors and crashed envs."""
import dataclasses
import sys
import threading
import time

import numpy as np
import pytest
from rollout_test_policies import PGPolicy, crash_once_env, local_only_env, slow_env

from replay.server import Server
from replay.table import Table
from tfrl.errors import WorkerCrashedError
from tfrl.rollout import ReplayOutputSpec, WorkerSet, replay_signature

pytestmark = pytest.mark.timeout(240)

BASE = {"rollout_fragment_length": 20, "num_cpus_per_worker": 0}


def weights_equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a["default_policy"], b["default_policy"]))


def test_weights_filters_and_calls_reach_every_worker(ray_session):
    ws = WorkerSet("CartPole-v1", PGPolicy, dict(BASE, observation_filter="MeanStdFilter"),
                   num_workers=2)
    try:
        assert ws.num_healthy_workers() == 2
        # a fully connected policy samples in numpy: the actors have not started TensorFlow
        assert ws.remote_policies_in_numpy
        assert ws.foreach_worker(lambda w: "tensorflow" in sys.modules,
                                 local_worker=False) == [False, False]
        # once one needs it, it runs TensorFlow on one thread of each kind so that actors do
        # not oversubscribe cores
        assert ws.foreach_worker(
            lambda w: (w.get_policy().tf_policy is not None,
                       __import__("tensorflow").config.threading.get_intra_op_parallelism_threads(),
                       __import__("tensorflow").config.threading.get_inter_op_parallelism_threads()),
            local_worker=False) == [(True, 1, 1), (True, 1, 1)]
        local = ws.local_worker()
        remote_weights = ws.foreach_worker(lambda w: w.get_weights(), local_worker=False)
        assert all(weights_equal(w, local.get_weights()) for w in remote_weights)

        local.learn_on_batch(local.sample())
        ws.sync_weights(global_vars={"timestep": 99})
        remote_weights = ws.foreach_worker(lambda w: w.get_weights(), local_worker=False)
        assert all(weights_equal(w, local.get_weights()) for w in remote_weights)
        assert ws.foreach_worker(lambda w: w.global_vars["timestep"]) == [99, 99, 99]
        assert ws.foreach_worker_with_index(lambda w, i: (i, w.worker_index)) == [
            (0, 0), (1, 1), (2, 2)]
        assert ws.foreach_policy(lambda p, pid: pid) == ["default_policy"] * 3

        batches = ws.call_remote_workers("sample")
        assert [b.count for b in batches] == [20, 20]
        local_count = local.filters["default_policy"].running_stat.count
        remote_counts = [f["default_policy"].delta.count
                         for f in ws.call_remote_workers("get_filters")]
        ws.sync_filters()
        merged = local.filters["default_policy"].running_stat
        assert merged.count == local_count + sum(remote_counts)
        for f in ws.call_remote_workers("get_filters"):
            assert f["default_policy"].running_stat.count == merged.count
            np.testing.assert_allclose(f["default_policy"].running_stat.mean, merged.mean)

        # weights sent without waiting are set before the next call each worker runs
        local.learn_on_batch(local.sample())
        pending = ws.sync_weights(wait=False)
        assert len(pending) == 2
        remote_weights = ws.call_remote_workers("get_weights")
        assert all(weights_equal(w, local.get_weights()) for w in remote_weights)
        assert ws.gather(pending) == [None, None]

        ws.add_workers(1)
        assert ws.num_healthy_workers() == 3
        assert sorted(ws.foreach_worker(lambda w: w.worker_index)) == [0, 1, 2, 3]
        assert weights_equal(ws.call_remote_workers("get_weights")[-1], local.get_weights())
    finally:
        ws.stop()


def test_actor_killed_in_the_middle_of_sampling_is_recreated_with_current_weights(ray_session):
    # steps of 2 ms of waiting: a 1,500-step fragment is still running when the victim is
    # killed a second in, however fast or loaded the machine is, and costs little CPU
    ws = WorkerSet(slow_env, PGPolicy, dict(BASE, rollout_fragment_length=1_500,
                                             env_config={"step_seconds": 0.002}),
                   num_workers=2)
    try:
        local = ws.local_worker()
        local.learn_on_batch(local.sample())
        ws.sync_weights()
        victim = ws.remote_workers()[0]
        results = {}
        sampler = threading.Thread(
            target=lambda: results.setdefault("batches", ws.call_remote_workers("sample")))
        sampler.start()
        time.sleep(1.0)  # let the long fragments start
        import ray

        ray.kill(victim)
        sampler.join(timeout=200)
        assert not sampler.is_alive()
        assert len(results["batches"]) == 1  # the healthy worker's fragment
        assert results["batches"][0].count == 1_500
        assert ws.num_worker_failures == 1
        assert ws.num_healthy_workers() == 2
        assert victim not in ws.remote_workers()
        replacement = ws.remote_workers()[0]
        assert ray.get(replacement.apply.remote(lambda w: w.worker_index)) == 1
        assert weights_equal(ray.get(replacement.get_weights.remote()), local.get_weights())
        ws.foreach_worker(lambda w: setattr(w.runner, "settings", dataclasses.replace(
            w.settings, rollout_fragment_length=10)))
        assert [b.count for b in ws.call_remote_workers("sample")] == [10, 10]
    finally:
        ws.stop()


def test_worker_whose_env_crashed_is_recreated_and_counted(ray_session, tmp_path):
    marker = tmp_path / "crash-once"
    ws = WorkerSet(crash_once_env, PGPolicy,
                   dict(BASE, env_config={"marker": str(marker)}), num_workers=2)
    try:
        marker.write_text("x")
        first = ws.call_remote_workers("sample")
        assert len(first) == 1 and ws.num_worker_failures == 1
        assert [b.count for b in ws.call_remote_workers("sample")] == [20, 20]
        assert ws.num_healthy_workers() == 2
    finally:
        ws.stop()


def test_remote_workers_write_into_replay_and_return_only_counts(ray_session, free_port):
    probe = WorkerSet("CartPole-v1", PGPolicy, BASE).local_worker()
    server = Server([Table.queue("steps", 10_000, signature=replay_signature(probe.get_policy()))],
                    port=free_port)
    try:
        spec = ReplayOutputSpec(f"127.0.0.1:{server.port}", "steps")
        ws = WorkerSet("CartPole-v1", PGPolicy, dict(BASE, num_envs_per_worker=2), num_workers=2,
                       replay_output=spec)
        try:
            summaries = ws.call_remote_workers("sample")
            assert [s["env_steps"] for s in summaries] == [40, 40]
            assert all("obs" not in s for s in summaries)
            samples = list(server.localhost_client().sample("steps", num_samples=80, timeout=10,
                                                            emit_timesteps=False))
            assert len(samples) == 80
        finally:
            ws.stop()
    finally:
        server.stop()


def test_a_remote_worker_that_fails_to_start_is_reported_at_first_use(ray_session):
    # Construction does not wait for the remote actors (the local worker is built meanwhile);
    # the first call that needs them waits and names the failure.
    ws = WorkerSet(local_only_env, PGPolicy, BASE, num_workers=1)
    try:
        with pytest.raises(WorkerCrashedError, match="(?s)failed to start.*no simulator licence"):
            ws.remote_workers()
        assert ws.num_remote_workers() == 0
        assert ws.local_worker().sample().count == 20
    finally:
        ws.stop()


def test_trainer_config_is_rllibs_name_of_the_worker_config(ray_session):
    ws = WorkerSet("CartPole-v1", PGPolicy, trainer_config=dict(BASE, rollout_fragment_length=7),
                   num_workers=1)
    try:
        assert ws.config["rollout_fragment_length"] == 7
        assert ws.foreach_worker(lambda w: w.config["rollout_fragment_length"]) == [7, 7]
        assert ws.foreach_worker(lambda w: w.sample().count, local_worker=False) == [7]
    finally:
        ws.stop()
    from tfrl.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="both config and trainer_config"):
        WorkerSet("CartPole-v1", PGPolicy, BASE, trainer_config=BASE)


def test_workers_without_room_to_start_are_named_in_a_warning(ray_session, monkeypatch, caplog):
    # two trainers on a small machine: the first one's workers hold every CPU
    import ray

    from tfrl.rollout import worker_set

    monkeypatch.setattr(worker_set, "WORKER_START_WARNING_S", 1.0)

    @ray.remote
    class Holder:
        def ready(self):
            return True

    free = ray.available_resources().get("CPU", 0)
    holder = Holder.options(num_cpus=free).remote()
    ray.get(holder.ready.remote())
    ws = WorkerSet("CartPole-v1", PGPolicy, dict(BASE, num_cpus_per_worker=1), num_workers=1)
    waiter = threading.Thread(target=ws.wait_until_started)
    try:
        with caplog.at_level("WARNING", logger="tfrl.rollout.worker_set"):
            waiter.start()
            deadline = time.monotonic() + 60
            while "have not started" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.2)
        assert "rollout workers for env 'CartPole-v1' have not started after 1 s" in caplog.text
        assert "1 CPU(s) (num_cpus_per_worker)" in caplog.text
        assert waiter.is_alive()  # still waiting, not failed
        ray.kill(holder)
        waiter.join(120)
        assert not waiter.is_alive()
        assert ws.foreach_worker(lambda w: w.sample().count, local_worker=False) == [20]
    finally:
        ray.kill(holder)
        waiter.join(120)
        ws.stop()
