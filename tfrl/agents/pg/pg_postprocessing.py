"""PG's trajectory postprocessing: discounted returns-to-go as advantages.

Where it sits: the rollout-worker side of PG's policy (pg_policy.py hands it to
build_tf_policy). It imports no TensorFlow: a remote worker that acts in numpy
(tfrl/policy/numpy_policy.py) loads this module to postprocess its fragments, and importing
the policy module would cost it TensorFlow's start-up.
"""
from __future__ import annotations

from tfrl.policy.postprocessing import compute_advantages
from tfrl.policy.sample_batch import SampleBatch, concat_samples


def postprocess_pg_returns(policy, sample_batch, other_agent_batches=None, episode=None):
    """Adds `advantages` = discounted returns-to-go (gamma = config["gamma"]) per episode piece.

    Without a critic there is nothing to bootstrap from, so a fragment cut mid-episode sums only
    the rewards it holds (use batch_mode "complete_episodes" for unbiased returns).

    Raises:
        InvalidBatchError: if the batch has no `rewards` column.
    """
    split = SampleBatch.EPS_ID in sample_batch or SampleBatch.TERMINATEDS in sample_batch
    pieces = sample_batch.split_by_episode() if split else [sample_batch]
    gamma = policy.config["gamma"]
    return concat_samples([compute_advantages(piece.copy(), 0.0, gamma, use_gae=False,
                                              use_critic=False) for piece in pieces])
