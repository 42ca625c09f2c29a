"""Benchmark of the policy hot paths (tfrl/policy/tf_policy.py) on CartPole-v1.

A 64x64 fully connected actor-critic policy (built with build_tf_policy, GAE postprocessing)
is timed on: `compute_actions` calls/s (and µs per call) at batch 1, 8 and 64 with the
observations given as a float32 numpy array, as rollout workers pass them; and
`learn_on_batch` rows/s on a postprocessed batch of 512 rows. One line per case.

Each case runs in rounds (100 calls, or 5 learn steps) for --seconds; the line gives the
median round and the best round, so that other load on the machine shows as a gap between
the two instead of silently lowering the figure.

    python tools/bench_policy.py [--seconds 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def make_policy(threads: int):
    import gymnasium as gym
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from tfrl.policy import SampleBatch, build_tf_policy, compute_gae_for_sample_batch

    def actor_critic_loss(policy, model, dist_class, train_batch):
        logits, _ = model({SampleBatch.OBS: train_batch[SampleBatch.OBS]}, None, None)
        logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
        vf_loss = tf.reduce_mean(tf.square(model.value_function() -
                                           train_batch[SampleBatch.VALUE_TARGETS]))
        return -tf.reduce_mean(logp * train_batch[SampleBatch.ADVANTAGES]) + 0.5 * vf_loss

    policy_class = build_tf_policy(
        "BenchActorCritic", loss_fn=actor_critic_loss,
        postprocess_fn=compute_gae_for_sample_batch,
        get_default_config=lambda: {"model": {"fcnet_hiddens": [64, 64]}, "lambda": 0.95})
    env = gym.make("CartPole-v1")
    return policy_class(env.observation_space, env.action_space, {"seed": 0})


def _rounds(call, per_round: int, seconds: float):
    """(median, best) calls/s over rounds of `per_round` calls lasting `seconds` in total."""
    times, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 3:
        round_start = time.perf_counter()
        for _ in range(per_round):
            call()
        times.append(time.perf_counter() - round_start)
    times.sort()
    return per_round / times[len(times) // 2], per_round / times[0]


def compute_actions_rate(policy, batch: int, seconds: float):
    import numpy as np

    obs = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
    for _ in range(20):
        policy.compute_actions(obs)
    return _rounds(lambda: policy.compute_actions(obs), 100, seconds)


def learn_rate(policy, rows: int, seconds: float):
    import numpy as np

    from tfrl.policy import SampleBatch

    rng = np.random.default_rng(0)
    obs = rng.normal(size=(rows, 4)).astype(np.float32)
    actions, _, extras = policy.compute_actions(obs)
    fragment = SampleBatch({
        SampleBatch.OBS: obs,
        SampleBatch.NEXT_OBS: rng.normal(size=(rows, 4)).astype(np.float32),
        SampleBatch.ACTIONS: actions,
        SampleBatch.REWARDS: np.ones(rows, np.float32),
        SampleBatch.TERMINATEDS: np.zeros(rows, bool),
        SampleBatch.TRUNCATEDS: np.zeros(rows, bool),
        SampleBatch.EPS_ID: np.zeros(rows, np.int64),
        SampleBatch.VF_PREDS: extras[SampleBatch.VF_PREDS],
    })
    batch = policy.postprocess_trajectory(fragment)
    for _ in range(3):
        policy.learn_on_batch(batch)
    median, best = _rounds(lambda: policy.learn_on_batch(batch), 5, seconds)
    return median * rows, best * rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per case")
    parser.add_argument("--threads", type=int, default=1,
                        help="TF intra/inter-op threads (0 = TensorFlow's default)")
    parser.add_argument("--learn-rows", type=int, default=512)
    args = parser.parse_args(argv)
    policy = make_policy(args.threads)
    for batch in (1, 8, 64):
        median, best = compute_actions_rate(policy, batch, args.seconds)
        print(f"compute_actions batch={batch:<3d} {median:8.0f} calls/s {1e6 / median:7.1f} "
              f"us/call {median * batch:9.0f} rows/s (best round {1e6 / best:.1f} us/call)",
              flush=True)
    median, best = learn_rate(policy, args.learn_rows, args.seconds)
    print(f"learn_on_batch  rows={args.learn_rows:<4d} {median:8.0f} rows/s "
          f"{1e3 * args.learn_rows / median:7.2f} ms/step (best round "
          f"{1e3 * args.learn_rows / best:.2f} ms/step)", flush=True)

if __name__ == "__main__":
    main()
