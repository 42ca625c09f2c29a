"""Classic RLlib's optimizer loop over a WorkerSet (the concepts document's "Policy
Optimization"): `AsyncSamplesOptimizer(workers, train_batch_size=500)` built outside a trainer,
driving a from-scratch `Policy` that is not a `build_tf_policy` one."""
import gymnasium as gym
import numpy as np

from tfrl.rllib.evaluation.worker_set import WorkerSet
from tfrl.rllib.optimizers import AsyncSamplesOptimizer
from tfrl.rllib.policy.policy import Policy


class CountingPolicy(Policy):
    """Random actions; `learn_on_batch` keeps what it was given and bumps its one weight."""

    def __init__(self, observation_space, action_space, config):
        Policy.__init__(self, observation_space, action_space, config)
        self.w = 0.0
        self.batches = []

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, info_batch=None, episodes=None, **kwargs):
        return [self.action_space.sample() for _ in obs_batch], [], {}

    def learn_on_batch(self, samples):
        self.batches.append({k: np.asarray(samples[k]) for k in ("obs", "t", "eps_id")})
        self.w += 1.0
        return {"rows": float(samples.count)}

    def get_weights(self):
        return {"w": self.w}

    def set_weights(self, weights):
        self.w = weights["w"]


def test_async_samples_optimizer_drives_a_from_scratch_policy_in_whole_fragments(ray_session):
    workers = WorkerSet(policy=CountingPolicy,
                        env_creator=lambda c: gym.make("CartPole-v1"), num_workers=1)
    optimizer = AsyncSamplesOptimizer(workers, train_batch_size=500)
    try:
        learner = workers.local_worker().get_policy()
        for _ in range(60):
            optimizer.step()
            if len(learner.batches) >= 2 and optimizer.num_weight_broadcasts >= 1:
                break
        assert len(learner.batches) >= 2
        # 500 steps is 2.5 fragments of the default 200: the learner reads 3 whole ones
        assert optimizer.fragments_per_batch == 3
        first = learner.batches[0]
        assert first["obs"].shape == (600, 4)
        for fragment in np.split(first["t"], 3):
            # each fragment's steps arrive in the order they were played (t restarts at 0 only
            # where an episode ended)
            steps = np.diff(fragment)
            assert np.all((steps == 1) | (fragment[1:] == 0))
        assert optimizer.stats()["num_steps_trained"] >= 600
        assert optimizer.learner_stats["default_policy"]["rows"] == 600.0
        # the learner's weights reach the rollout worker
        optimizer.step()
        remote_w = workers.foreach_worker(lambda w: w.get_policy().w, local_worker=False)
        assert remote_w[0] >= 1.0
    finally:
        optimizer.stop()
        workers.stop()
