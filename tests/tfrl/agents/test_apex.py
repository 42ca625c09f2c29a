"""Ape-X (APEX) through the AsyncReplayOptimizer: real Ray rollout workers writing into two
real replay shard servers on loopback, the learner reading from both, priorities going back to
each item's shard, per-worker epsilons and published weights reaching the workers."""
import collections
import itertools
import time
import weakref

import numpy as np
import pytest

from tests.tfrl.agents.agent_helpers import stop_frees
from tfrl.agents.dqn import ApexTrainer
from tfrl.agents.dqn.apex import validate_config
from tfrl.errors import InvalidConfigError
from tfrl.learner.priority_sender import PrioritySender
from tfrl.optimizers.async_replay_optimizer import REPLAY_TABLE, _SHARD
from tfrl.optimizers.per_worker_exploration import per_worker_epsilon
from tfrl.policy import SampleBatch

# The Ape-X example of docs/training.md, with a small network and short iterations for the test.
README_CONFIG = {
    "num_workers": 3,
    "num_replay_shards": 2,
    "learning_starts": 1000,
    "buffer_size": 50000,
    "train_batch_size": 64,
    "target_network_update_freq": 2000,
    "max_weight_sync_delay": 20,
    "timesteps_per_iteration": 1000,
    "min_iter_time_s": 0,
}
SMALL = dict(README_CONFIG, num_envs_per_worker=1, rollout_fragment_length=16,
             learning_starts=64, train_batch_size=16, timesteps_per_iteration=96,
             target_network_update_freq=64, max_weight_sync_delay=2, learner_steps_per_call=2,
             hiddens=[16], model={"fcnet_hiddens": [16]}, seed=3)


@pytest.fixture(scope="module")
def apex(ray_session):
    trainer = ApexTrainer(env="CartPole-v1", config=SMALL)
    yield trainer
    trainer.stop()


def shard_items(trainer, shard, num_samples=400):
    """{key: (priority, data)} of the items sampled from `shard` (prioritized, with repeats)."""
    client = trainer.optimizer.shards.client(shard)
    return {int(s.info.key): (float(s.info.priority), s.data)
            for s in client.sample(REPLAY_TABLE, num_samples=num_samples, timeout=30,
                                   emit_timesteps=False, unpack_as_table_signature=True)}


def readme_apex_config():
    """The config dict of the ApexTrainer example in docs/training.md."""
    import ast
    import pathlib

    readme = (pathlib.Path(__file__).parents[3] / "docs" / "training.md").read_text()
    block = readme[readme.index("trainer = ApexTrainer("):]
    call = ast.parse(block[:block.index("})") + 2]).body[0].value
    return ast.literal_eval(next(k.value for k in call.keywords if k.arg == "config"))


def test_readme_shows_the_tested_config():
    assert readme_apex_config() == README_CONFIG


def test_per_worker_epsilon_follows_the_apex_formula():
    assert per_worker_epsilon(0, 4) == pytest.approx(0.4)
    assert per_worker_epsilon(3, 4) == pytest.approx(0.4 ** 8)
    assert per_worker_epsilon(1, 3, epsilon=0.5, alpha=2.0) == pytest.approx(0.5 ** 2)
    assert per_worker_epsilon(0, 1) == pytest.approx(0.4)
    with pytest.raises(InvalidConfigError, match="outside"):
        per_worker_epsilon(4, 4)


def test_config_errors_are_named():
    config = ApexTrainer.default_config()
    with pytest.raises(InvalidConfigError, match="worker_side_prioritization"):
        validate_config(dict(config, prioritized_replay=False))
    with pytest.raises(InvalidConfigError, match="replay_shard_addresses"):
        validate_config(dict(config, replay_shard_addresses="127.0.0.1:1"))
    with pytest.raises(InvalidConfigError, match="replay_shard_addresses"):
        validate_config(dict(config, replay_address="127.0.0.1:1"))


def test_the_priority_sender_sends_the_latest_priorities_per_shard_and_raises_a_failed_send():
    from replay import Fifo, MinSize, Prioritized, Server, Table
    from replay import errors as replay_errors

    servers = [Server([Table(REPLAY_TABLE, Prioritized(1.0), Fifo(), 100, MinSize(1))])
               for _ in range(2)]
    clients = [server.localhost_client() for server in servers]
    for client in clients:
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for i in range(4):
                writer.append(np.full(2, i, np.float32))
                writer.create_item(REPLAY_TABLE, 1.0, writer.history[-1])
    keys = [sorted({int(s.info.key) for s in client.sample(REPLAY_TABLE, num_samples=200,
                                                           emit_timesteps=False, unpack_as_table_signature=True)})
            for client in clients]
    assert all(len(k) == 4 for k in keys)
    calls = []

    def send(shard, updates):
        calls.append((shard, dict(updates)))
        clients[shard].mutate_priorities(REPLAY_TABLE, updates=updates)

    sender = PrioritySender(send)
    try:
        sender.put({0: {keys[0][0]: 5.0, keys[0][1]: 6.0}, 1: {keys[1][0]: 2.0}})
        sender.put({0: {keys[0][0]: 7.0}})  # the same key again: the latest priority wins
        assert sender.flush(timeout=30)
        for shard, expected in ((0, {keys[0][0]: 7.0, keys[0][1]: 6.0}), (1, {keys[1][0]: 2.0})):
            priorities = {int(s.info.key): float(s.info.priority)
                          for s in clients[shard].sample(REPLAY_TABLE, num_samples=200,
                                                         emit_timesteps=False, unpack_as_table_signature=True)}
            for key, priority in expected.items():
                assert priorities[key] == pytest.approx(priority)
        # every update reached its own shard only, each shard's in calls of that shard
        assert {k for shard, u in calls if shard == 0 for k in u} == set(keys[0][:2])
        assert {k for shard, u in calls if shard == 1 for k in u} == {keys[1][0]}

        servers[1].stop()  # a lost shard: the send fails in the sender's thread
        sender.put({1: {keys[1][1]: 3.0}})
        with pytest.raises(replay_errors.ReplayError):
            sender.flush(timeout=60)
        assert sender.flush(timeout=30)  # raised once; the sender goes on
        sender.put({0: {keys[0][2]: 9.0}})
        assert sender.flush(timeout=30)
        assert any(float(s.info.priority) == pytest.approx(9.0)
                   for s in clients[0].sample(REPLAY_TABLE, num_samples=200,
                                              emit_timesteps=False, unpack_as_table_signature=True)
                   if int(s.info.key) == keys[0][2])
    finally:
        sender.close()
        servers[0].stop()


@pytest.mark.timeout(300)
def test_workers_rate_their_transitions_and_priorities_go_back_to_their_shard(apex):
    optimizer = apex.optimizer
    workers = apex.workers.remote_workers()
    # every worker gets the learner's online and target weights, then samples twice: each
    # fragment goes to one shard, the next to the other
    optimizer.publish_weights(target=True)
    for worker in workers:
        optimizer.send_newest_weights(worker)
    apex.workers.call_remote_workers("sample")
    apex.workers.call_remote_workers("sample")

    policy = optimizer.policy
    for shard in range(2):
        items = shard_items(apex, shard)
        keys = list(items)
        data = {k: np.stack([items[key][1][k] for key in keys]) for k in items[keys[0]][1]}
        td = policy.compute_td_error(data[SampleBatch.OBS], data[SampleBatch.ACTIONS],
                                     data[SampleBatch.REWARDS], data[SampleBatch.NEXT_OBS],
                                     data[SampleBatch.TERMINATEDS],
                                     **{SampleBatch.N_STEPS: data[SampleBatch.N_STEPS]})
        priorities = np.array([items[key][0] for key in keys])
        # the initial priorities are the workers' own |TD error| + eps, not a uniform 1.0
        np.testing.assert_allclose(priorities, np.abs(td) + 1e-6, rtol=1e-4, atol=1e-5)
        assert priorities.std() > 1e-3

    # the learner reads batches from both shards, tagged with the shard they came from
    outputs = optimizer.learner.train(optimizer.iterator, num_steps=4)
    shards_of = {int(s) for o in outputs for s in o.per_sample[_SHARD]}
    assert shards_of == {0, 1}
    # new TD errors (large and distinct, so they cannot be mistaken for initial priorities)
    expected = {0: {}, 1: {}}
    for i, output in enumerate(outputs):
        rows = len(output.info.key)
        output.per_sample[SampleBatch.TD_ERROR] = 100.0 + 10 * i + np.arange(rows) / rows
        for key, shard, td in zip(output.info.key, output.per_sample[_SHARD],
                                  output.per_sample[SampleBatch.TD_ERROR]):
            expected[int(shard)][int(key)] = td + 1e-6
    optimizer._update_priorities(outputs)
    assert optimizer.flush_priorities(timeout=30)
    for shard in range(2):
        items = shard_items(apex, shard, num_samples=1000)
        raised = {key for key, (priority, _) in items.items() if priority >= 100}
        # every item updated on this shard is one this shard served, with its new priority;
        # the other shard's updates did not land here
        assert raised and raised <= set(expected[shard])
        for key in raised:
            assert items[key][0] == pytest.approx(expected[shard][key], rel=1e-6)
    assert optimizer.priority_updates_per_shard == [len(expected[0]), len(expected[1])]


@pytest.mark.timeout(300)
def test_readme_example_trains_with_per_worker_epsilons_and_published_weights(apex):
    import ray

    optimizer = apex.optimizer
    published = []
    original = optimizer.publish_weights

    def recording(target=False):
        original(target)
        published.append(ray.get(optimizer._weights_ref)["default_policy"])

    optimizer.publish_weights = recording
    initial = [w.copy() for w in apex.get_policy().get_weights()]
    # the learner runs in its own thread and starts once its datasets deliver: train on
    # (bounded by a minute) until it has trained, copied its target and sent priorities to both
    # shards. Iterations of this config last a few hundredths of a second, so a fixed count of
    # them passed only when earlier tests of the module had already started the learner.
    deadline = time.monotonic() + 60
    for iteration in itertools.count():
        result = apex.train()
        info = result["info"]
        if iteration >= 1 and (time.monotonic() > deadline or (
                info["num_train_steps"] > 0 and info["num_target_updates"] >= 1
                and all(n > 0 for n in optimizer.priority_updates_per_shard))):
            break
    assert info["num_replay_shards"] == 2
    assert info["num_steps_sampled"] >= 2 * 96
    assert info["num_train_steps"] > 0 and info["num_steps_trained"] > 0
    assert info["num_target_updates"] >= 1
    assert result["info"]["learner"]["default_policy"]["mean_q"] != 0
    assert any(not np.allclose(a, b) for a, b in zip(initial, apex.get_policy().get_weights()))
    # both shards got the learner's priority updates
    assert all(n > 0 for n in optimizer.priority_updates_per_shard)

    workers = apex.workers.remote_workers()
    # every worker has two sample() calls outstanding (RLlib's default), so it starts its next
    # fragment as soon as one ends instead of waiting for the driver
    outstanding = collections.Counter(optimizer._in_flight.values())
    assert set(outstanding) == set(workers) and sorted(outstanding.values()) == [2, 2, 2]
    # the workers act with DQN's numpy stand-in (numpy_q_policy.py): no TensorFlow started
    epsilons = ray.get([w.apply.remote(
        lambda worker: (worker.worker_index, worker.get_policy().epsilon_schedule.value(0),
                        "tensorflow" in __import__("sys").modules))
        for w in workers])
    for index, epsilon, has_tensorflow in epsilons:
        assert epsilon == pytest.approx(0.4 ** (1 + (index - 1) / 2 * 7), rel=1e-5)
        assert not has_tensorflow
    assert len({round(e, 6) for _, e, _ in epsilons}) == 3

    # each worker acts with weights the learner published after learning started; one whose
    # fragments were all launched before the learner's first new version still holds the
    # version of its start, so train on (bounded) until every worker was relaunched after one
    def held(worker):
        return ray.get(worker.get_weights.remote())["default_policy"]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(any(not np.array_equal(a, b) for a, b in zip(held(w), initial)) for w in workers):
            break
        apex.train()
    assert len(published) >= 2
    for worker in workers:
        weights = held(worker)
        matches = [i for i, p in enumerate(published)
                   if all(np.array_equal(a, b) for a, b in zip(weights, p))]
        assert matches, "a worker holds weights the learner never published"
        assert not all(np.array_equal(a, b) for a, b in zip(weights, initial))


@pytest.mark.timeout(300)
def test_a_weights_version_is_published_once_a_worker_took_the_last_one(apex, monkeypatch):
    import dataclasses

    import ray

    optimizer = apex.optimizer
    apex.train()
    # the learner's calls run here instead of in its thread; no target copy publishes meanwhile
    optimizer._stop_learner()
    optimizer._open_datasets()
    monkeypatch.setattr(optimizer, "settings", dataclasses.replace(
        optimizer.settings, target_network_update_freq=10 ** 9))
    optimizer.publish_weights()
    version = optimizer._weights_version
    steps = optimizer.num_train_steps
    # a publication is due every 2 gradient steps, but no worker took this version yet
    for _ in range(3):
        assert optimizer._learn_once()
    assert optimizer.num_train_steps >= steps + 3
    assert optimizer._weights_version == version
    worker = apex.workers.remote_workers()[0]
    optimizer.send_newest_weights(worker)
    taken = ray.get(optimizer._weights_ref)["default_policy"]
    held = ray.get(worker.get_weights.remote())["default_policy"]
    assert all(np.array_equal(a, b) for a, b in zip(held, taken))
    # taken: the next due call publishes the learner's newest weights
    assert optimizer._learn_once()
    assert optimizer._weights_version == version + 1
    newest = ray.get(optimizer._weights_ref)["default_policy"]
    assert all(np.array_equal(a, b) for a, b in zip(newest, optimizer.policy.get_weights()))
    assert any(not np.array_equal(a, b) for a, b in zip(newest, taken))


@pytest.mark.timeout(300)
def test_a_failing_learner_thread_is_raised_by_train(apex):
    from tfrl.errors import TfrlError

    optimizer = apex.optimizer
    optimizer._start_learner()

    def broken_train(*args, **kwargs):  # the injected fault: a learner step that fails
        raise RuntimeError("injected learner failure")

    optimizer.learner.train = broken_train
    with pytest.raises(TfrlError, match="learner thread failed: RuntimeError: injected"):
        for _ in range(20):
            apex.train()


@pytest.mark.timeout(300)
def test_stop_takes_the_outcome_of_the_samples_its_stopped_shards_fail(ray_session, monkeypatch):
    """Samples still running when the trainer stops fail as they write to the stopped shards
    (or wait on the stopped learner, under a replay ratio): stop() takes those expected
    failures, so Ray has none left to print as unhandled errors."""
    import gc
    import time

    import ray
    from ray._private import worker as ray_worker

    unhandled = []
    monkeypatch.setattr(ray_worker, "_unhandled_error_handler", unhandled.append)
    # long samples: both workers are still sampling when the shards stop
    trainer = ApexTrainer(env="CartPole-v1", config=dict(
        SMALL, num_workers=2, rollout_fragment_length=3000, timesteps_per_iteration=1))
    optimizer = trainer.optimizer
    running_at_shard_stop = []
    stop_shards = optimizer.shards.stop

    in_flight = []

    def spying_stop():
        ready, _ = ray.wait(in_flight, num_returns=len(in_flight), timeout=0)
        running_at_shard_stop.append(len(in_flight) - len(ready))
        in_flight.clear()  # holding the references here would take the errors for stop()
        stop_shards()

    optimizer.shards.stop = spying_stop
    try:
        trainer.train()
        in_flight.extend(optimizer._in_flight)
    finally:
        trainer.stop()
    assert running_at_shard_stop and running_at_shard_stop[0] >= 1
    gc.collect()
    deadline = time.monotonic() + 5.0
    while not unhandled and time.monotonic() < deadline:
        time.sleep(0.25)
    assert unhandled == []


@pytest.mark.timeout(300)
def test_stop_frees_the_learner_iterator_without_a_garbage_collection(ray_session):
    """A stopped trainer's tf.data iterator must not wait for a later full collection: freed
    there, its destructor waited for tf.data's threads holding the GIL, stalling whatever the
    process ran next."""
    trainer = ApexTrainer(env="CartPole-v1", config=dict(SMALL, num_workers=1, num_replay_shards=1))
    try:
        trainer.train()
    except BaseException:
        trainer.stop()
        raise
    freed = stop_frees(trainer, weakref.ref(trainer.optimizer.iterator))
    assert freed
