"""The gradient-exchanging policy optimizers (sharded parameter server, allreduce) against the
synchronous learner on the same samples, their config errors, and `optimizer: auto` switching."""
import logging

import numpy as np
import pytest

from tfrl.agents.a3c import A3CTrainer
from tfrl.agents.pg import PGTrainer
from tfrl.errors import CheckpointError, InvalidConfigError
from tfrl.optimizers.flat_gradients import flat_trainable_weights
from tfrl.policy.sample_batch import concat_samples

SMALL = {"num_workers": 2, "num_cpus_per_worker": 0, "model": {"fcnet_hiddens": [16]},
         "min_iter_time_s": 0, "seed": 3}


def _samples(trainer, count):
    import ray

    workers = trainer.workers.remote_workers()
    return ray.get([workers[i % len(workers)].sample.remote() for i in range(count)])


def _baseline_policy(trainer, weights):
    local = trainer.workers.local_worker()
    policy = local.get_policy()
    baseline = type(policy)(policy.observation_space, policy.action_space, policy.config)
    baseline.set_weights(weights)
    return baseline


def test_sharded_ps_applies_each_gradient_as_the_synchronous_learner_does(ray_session):
    # one rollout worker is enough: the samples are taken here and pushed by this test
    trainer = PGTrainer(config=dict(SMALL, optimizer="sharded_ps", num_ps_shards=3, num_workers=1,
                                    rollout_fragment_length=25, train_batch_size=50),
                        env="CartPole-v1")
    try:
        policy = trainer.workers.local_worker().get_policy()
        start = flat_trainable_weights(policy)
        baseline = _baseline_policy(trainer, policy.get_weights())
        batches = _samples(trainer, 2)
        trainer.optimizer.step_on_samples(batches)  # two pushes, each through all 3 shards
        for batch in batches:
            baseline.learn_on_batch(batch)  # Adam: the second step depends on the first's slots
        result = flat_trainable_weights(policy)
        assert np.abs(result - start).max() > 1e-4  # the weights moved
        np.testing.assert_allclose(result, flat_trainable_weights(baseline), rtol=1e-4, atol=1e-6)
    finally:
        trainer.stop()


def test_allreduce_step_matches_the_synchronous_step_on_the_union_of_the_samples(ray_session):
    trainer = PGTrainer(config=dict(SMALL, optimizer="allreduce", rollout_fragment_length=25,
                                    train_batch_size=50), env="CartPole-v1")
    try:
        policy = trainer.workers.local_worker().get_policy()
        start = flat_trainable_weights(policy)
        baseline = _baseline_policy(trainer, policy.get_weights())
        batches = _samples(trainer, 4)
        for pair in (batches[:2], batches[2:]):  # two steps: Adam's slots must agree too
            trainer.optimizer.step_on_samples(pair)
            baseline.learn_on_batch(concat_samples(pair))
        result = flat_trainable_weights(policy)
        assert np.abs(result - start).max() > 1e-4
        np.testing.assert_allclose(result, flat_trainable_weights(baseline), rtol=1e-4, atol=1e-6)
        # every worker holds the same weights: no central copy keeps them in sync
        import ray

        for worker in trainer.workers.remote_workers():
            remote = ray.get(worker.get_weights.remote())["default_policy"]
            for a, b in zip(remote, policy.get_weights()):
                np.testing.assert_array_equal(a, b)
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls, overrides, message", [
    (PGTrainer, {"optimizer": "async_gradients"}, "'async_gradients' is not available"),
    (PGTrainer, {"optimizer": "bogus"}, "choose one of 'sync_samples'"),
    (PGTrainer, {"optimizer": 3}, "config key 'optimizer' must be"),
    (A3CTrainer, {"optimizer": "sharded_ps", "num_ps_shards": 0}, "num_ps_shards"),
    (A3CTrainer, {"optimizer": "sharded_ps"}, "set num_workers >= 1"),
    (PGTrainer, {"optimizer": "auto", "auto_candidates": ["sync_samples", "multi_device"]},
     "more than one of"),
    (PGTrainer, {"optimizer": "auto", "auto_candidates": ["async_gradients"]},
     "auto_candidates"),
])
def test_bad_optimizer_settings_are_refused_with_the_key_named(ray_session, trainer_cls,
                                                               overrides, message):
    config = dict(SMALL, num_workers=0, rollout_fragment_length=20, train_batch_size=40,
                  **overrides)
    with pytest.raises(InvalidConfigError, match=message):
        trainer_cls(config=config, env="CartPole-v1")


def test_auto_switches_to_the_parameter_server_when_one_worker_is_slow(ray_session):
    """Worker 2 sleeps 0.4 s per gradient: allreduce waits for it every round, the pipelined
    parameter server goes on with worker 1's gradients."""
    trainer = A3CTrainer(config=dict(
        SMALL, optimizer="auto", auto_candidates=["allreduce", "sharded_ps"],
        auto_warmup_steps=1, auto_trial_steps=1, rollout_fragment_length=10,
        train_batch_size=40, debug_gradient_delay_s=[0.0, 0.4]), env="CartPole-v1")
    try:
        _wait_until_ready(trainer.optimizer.candidates["sharded_ps"])
        for _ in range(5):
            info = trainer.train()["info"]["optimizer"]
            if info["phase"] == "committed":
                break
        assert info["phase"] == "committed"
        assert info["waiting"] == []
        assert info["strategy"] == "sharded_ps"
        assert set(info["rates"]) == {"allreduce", "sharded_ps"}
        assert max(info["rates"], key=info["rates"].get) == "sharded_ps"
        assert info["num_switches"] >= 1
        assert info["switches"][-1]["to"] == "sharded_ps"
        assert info["decision"].startswith("sharded_ps: fastest of the trials")
        # a new worker changes the runtime picture: the strategies are measured again
        trainer.workers.add_workers(1)
        info = trainer.train()["info"]["optimizer"]
        assert info["phase"] == "trial"
        assert info["rates"] == {}
    finally:
        trainer.stop()


def _wait_until_ready(optimizer, timeout_s=120.0):
    import time

    deadline = time.monotonic() + timeout_s
    while not optimizer.ready():
        assert time.monotonic() < deadline, "the parameter shard actors never started"
        time.sleep(0.2)


def test_auto_measures_a_starting_candidate_later_and_cuts_a_slow_trial_short(ray_session):
    """While the shard actors start (their readiness held back here), allreduce runs; the
    parameter server is measured once they are up and wins. Measured again after a worker is
    added, allreduce's slow first measured step (worker 2 sleeps 3 s per gradient) ends its
    trial there, under auto_abandon_ratio of sharded_ps's rate. The delay is long enough that
    allreduce stays under that ratio even when load on the machine slows sharded_ps's trial to
    a third of its quiet rate (1.5 s was not: sharded_ps measured 54 steps/s in one loaded run,
    and allreduce came out just above half of it)."""
    trainer = A3CTrainer(config=dict(
        SMALL, optimizer="auto", auto_candidates=["sharded_ps", "allreduce"],
        auto_warmup_steps=1, auto_trial_steps=2, auto_abandon_ratio=0.5,
        rollout_fragment_length=10, train_batch_size=40, debug_gradient_delay_s=[0.0, 3.0]),
        env="CartPole-v1")
    sharded = trainer.optimizer.candidates["sharded_ps"]
    actors_started = sharded.ready
    sharded.ready = lambda: False
    try:
        infos = [trainer.train()["info"]["optimizer"] for _ in range(3)]
        assert [i["strategy"] for i in infos] == ["allreduce"] * 3
        provisional = infos[-1]
        assert provisional["phase"] == "committed" and provisional["waiting"] == ["sharded_ps"]
        assert "still starting, measured later: sharded_ps" in provisional["decision"]
        assert set(provisional["rates"]) == {"allreduce"}

        sharded.ready = actors_started
        _wait_until_ready(sharded)
        for _ in range(4):
            info = trainer.train()["info"]["optimizer"]
        assert info["phase"] == "committed" and info["waiting"] == []
        assert info["strategy"] == "sharded_ps"
        assert info["rates"]["sharded_ps"] > info["rates"]["allreduce"], info
        assert info["switches"][-1]["to"] == "sharded_ps"

        trainer.workers.add_workers(1)
        strategies = []
        for _ in range(5):
            info = trainer.train()["info"]["optimizer"]
            strategies.append(info["strategy"])
        # sharded_ps measured first (it is running): 3 steps; allreduce: warm-up + 1 measured
        assert strategies == ["sharded_ps"] * 3 + ["allreduce", "sharded_ps"], str(info)
        assert info["phase"] == "committed" and info["waiting"] == []
        assert info["rates"]["allreduce"] < 0.5 * info["rates"]["sharded_ps"]
    finally:
        trainer.stop()


PS_CONFIG = dict(SMALL, optimizer="sharded_ps", num_ps_shards=2, rollout_fragment_length=10,
                 train_batch_size=40)


def _shard_states(trainer):
    import ray

    return ray.get([shard.get_state.remote() for shard in trainer.optimizer.shards])


def _assert_same_shard_states(actual, expected):
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        np.testing.assert_array_equal(got["values"], want["values"])
        assert len(got["optimizer"]) == len(want["optimizer"])
        for a, b in zip(got["optimizer"], want["optimizer"]):
            np.testing.assert_array_equal(a, b)


def test_sharded_ps_checkpoint_restores_each_shards_weights_and_optimizer_slots(ray_session,
                                                                                tmp_path):
    trainer = A3CTrainer(config=dict(PS_CONFIG), env="CartPole-v1")
    restored = mismatched = None
    try:
        for _ in range(2):
            trainer.train()
        path = trainer.save(str(tmp_path))
        saved = A3CTrainer.load_checkpoint_state(path)["optimizer"]["ps_shards"]
        _assert_same_shard_states(_shard_states(trainer), saved)
        # Adam's iteration count and moments moved: the slots are worth restoring
        assert all(int(s["optimizer"][0]) >= 4 for s in saved)
        assert all(np.abs(s["optimizer"][1]).max() > 0 for s in saved)

        # the restored trainer takes its samples from the first one: one rollout worker of its
        # own is enough (the checkpoint's shard states do not depend on the number of workers)
        restored = A3CTrainer(config=dict(PS_CONFIG, num_workers=1), env="CartPole-v1")
        restored.restore(path)
        _assert_same_shard_states(_shard_states(restored), saved)

        # the next update continues as the uninterrupted trainer's does (same gradients in)
        batches = _samples(trainer, 2)
        trainer.optimizer.step_on_samples(batches)
        restored.optimizer.step_on_samples(batches)
        np.testing.assert_allclose(flat_trainable_weights(restored.get_policy()),
                                   flat_trainable_weights(trainer.get_policy()),
                                   rtol=1e-5, atol=1e-7)
        _assert_same_shard_states(_shard_states(restored), _shard_states(trainer))

        mismatched = A3CTrainer(config=dict(PS_CONFIG, num_ps_shards=3, num_workers=1),
                                env="CartPole-v1")
        with pytest.raises(CheckpointError, match="num_ps_shards"):
            mismatched.restore(path)
    finally:
        for t in (trainer, restored, mismatched):
            if t is not None:
                t.stop()


def _kill_and_wait_until_dead(actor):
    import ray

    ray.kill(actor, no_restart=True)
    for _ in range(100):  # a call made before the kill lands may still be answered
        try:
            ray.get(actor.ping.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            return
    raise AssertionError("the killed shard actor kept answering")


def test_a_dead_parameter_shard_is_recreated_from_the_drivers_copy_and_training_goes_on(
        ray_session, caplog):
    trainer = PGTrainer(config=dict(PS_CONFIG), env="CartPole-v1")
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["info"]["optimizer"]["num_shard_failures"] == 0
        copy = trainer.optimizer.save()["ps_shards"]  # the driver's copy, end of iteration 2
        trained_before = trainer.optimizer.num_steps_trained
        dead = trainer.optimizer.shards[1]
        _kill_and_wait_until_dead(dead)

        with caplog.at_level(logging.WARNING, logger="tfrl.optimizers.sharded_ps_optimizer"):
            result = trainer.train()  # workers still have gradients in flight (pipelining)
        info = result["info"]["optimizer"]
        assert info["num_shard_failures"] == 1
        assert info["shard_failures"][-1]["shard"] == 1
        # taken at the end of iteration 2 (sharded_ps trains every env step it samples)
        assert info["shard_failures"][-1]["restored_from_timesteps"] == trained_before
        assert "parameter shard 1 of 2 died" in caplog.text
        assert trainer.optimizer.num_steps_trained >= trained_before + PS_CONFIG["train_batch_size"]
        live = _shard_states(trainer)
        # the recreated shard holds its slice and optimizer variables from the driver's copy;
        # the surviving shard went on learning
        _assert_same_shard_states(live[1:], copy[1:])
        assert np.abs(live[0]["values"] - copy[0]["values"]).max() > 0
        np.testing.assert_array_equal(flat_trainable_weights(trainer.get_policy()),
                                      np.concatenate([s["values"] for s in live]))

        result = trainer.train()  # the recreated shard takes gradients again
        assert result["info"]["optimizer"]["num_shard_failures"] == 1
        assert np.abs(_shard_states(trainer)[1]["values"] - copy[1]["values"]).max() > 0
    finally:
        trainer.stop()



def test_ppo_auto_measures_sync_samples_instead_of_multi_device_on_one_learner_device(
        ray_session):
    """The tests' TensorFlow has 2 logical CPU devices (tests/conftest.py)."""
    from tfrl.agents.ppo import PPOTrainer

    config = dict(SMALL, num_workers=1, optimizer="auto", rollout_fragment_length=20,
                  train_batch_size=40, sgd_minibatch_size=20, num_sgd_iter=1)
    for devices, expected in ((1, ["sync_samples", "allreduce"]),
                              ("auto", ["multi_device", "allreduce"])):
        trainer = PPOTrainer(config=dict(config, num_learner_devices=devices), env="CartPole-v1")
        try:
            assert trainer.optimizer.candidate_names == expected
        finally:
            trainer.stop()
