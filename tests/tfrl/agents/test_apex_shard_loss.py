"""Ape-X when a replay shard is lost: a real shard server process (a Ray actor) killed
mid-training, as when its node dies. Without shard checkpoints the trainer goes on with the other
shards. (A shard restarted from its checkpoint on another node: tests/tfrl/cluster/
test_shard_loss.py.)"""
import time

import pytest

from tfrl.agents.dqn import ApexTrainer
from tfrl.optimizers.async_replay_optimizer import REPLAY_TABLE

from tests.tfrl.agents.test_apex import SMALL


def table(trainer, shard):
    return trainer.optimizer.shards.client(shard).server_info(timeout=30)[REPLAY_TABLE]


def worker_shard_addresses(trainer):
    import ray

    return ray.get([w.apply.remote(lambda worker: [c.address for c in worker.replay_output.clients])
                    for w in trainer.workers.remote_workers()])


def kill_shard(trainer, shard):
    """The injected fault: the shard's server process dies, as it does with its node."""
    import ray

    ray.kill(trainer.optimizer.shards._actors[shard])


def train_until(trainer, condition, seconds=120.0):
    """Trains until `condition()` holds (the learner restarts, and retraces, after a loss: a
    wait in wall-clock time, however short the iterations); returns the last result."""
    deadline = time.monotonic() + seconds
    while True:
        result = trainer.train()
        if condition():
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {seconds} s: {result['info']}")


@pytest.mark.timeout(300)
def test_a_lost_shard_is_dropped_and_training_goes_on(ray_session):
    trainer = ApexTrainer(env="CartPole-v1",
                          config=dict(SMALL, replay_shard_check_interval_s=1.0))
    try:
        trainer.train()
        optimizer = trainer.optimizer
        kept = optimizer.shards.addresses[0]
        kill_shard(trainer, 1)
        inserts_before = table(trainer, 0).num_inserts
        trained_before = optimizer.num_steps_trained
        # the loss is noticed at the next shard check (until then a priority update to the lost
        # shard may fail); after it, priorities go out from the new learner's sender thread:
        # wait for those queued so far
        result = train_until(trainer, lambda: optimizer.live_shards == [0]
                             and optimizer.num_steps_trained > trained_before
                             and optimizer.flush_priorities(timeout=30)
                             and optimizer.priority_updates_per_shard[0] > 0)
        info = result["info"]
        assert info["num_replay_shard_failures"] == 1
        assert info["num_replay_shard_restarts"] == 0
        assert info["num_replay_shards_live"] == 1
        assert optimizer.live_shards == [0]
        # the workers write only to the shard left, and the learner keeps training from it
        assert all(addresses == [kept] for addresses in worker_shard_addresses(trainer))
        assert table(trainer, 0).num_inserts > inserts_before
        assert optimizer.priority_updates_per_shard[0] > 0
    finally:
        trainer.stop()


def test_shard_checkpoints_of_external_servers_are_refused_with_what_to_do():
    from tfrl.errors import InvalidConfigError
    from tfrl.replay_hosting import ReplayShards

    with pytest.raises(InvalidConfigError, match="replay-server --checkpoint-dir"):
        ReplayShards(addresses=["127.0.0.1:1"], checkpoint_dir="shards")
    shards = ReplayShards(num_shards=2)
    with pytest.raises(InvalidConfigError, match="replay_shard_checkpoint_dir"):
        shards.restart(0)
