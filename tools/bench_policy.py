"""Benchmark of the policy hot paths (tfrl/policy/tf_policy.py) on CartPole-v1.

A 64x64 fully connected actor-critic policy (built with build_tf_policy, GAE postprocessing)
is timed on: `compute_actions` calls/s (and µs per call) at batch 1, 8 and 64 with the
observations given as a float32 numpy array, as rollout workers pass them; and
`learn_on_batch` rows/s on a postprocessed batch of 512 rows. One line per case.

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


def compute_actions_rate(policy, batch: int, seconds: float) -> float:
    import numpy as np

    obs = np.random.default_rng(batch).normal(size=(batch, 4)).astype(np.float32)
    for _ in range(20):
        policy.compute_actions(obs)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            policy.compute_actions(obs)
        calls += 100
    return calls / (time.perf_counter() - start)


def learn_rate(policy, rows: int, seconds: float) -> float:
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
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        policy.learn_on_batch(batch)
        steps += 1
    return steps * rows / (time.perf_counter() - start)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per case")
    parser.add_argument("--threads", type=int, default=1,
                        help="TF intra/inter-op threads (0 = TensorFlow's default)")
    parser.add_argument("--learn-rows", type=int, default=512)
    args = parser.parse_args(argv)
    policy = make_policy(args.threads)
    for batch in (1, 8, 64):
        rate = compute_actions_rate(policy, batch, args.seconds)
        print(f"compute_actions batch={batch:<3d} {rate:10.0f} calls/s "
              f"{1e6 / rate:8.1f} us/call {rate * batch:10.0f} rows/s", flush=True)
    rate = learn_rate(policy, args.learn_rows, args.seconds)
    print(f"learn_on_batch  rows={args.learn_rows:<4d} {rate:10.0f} rows/s "
          f"{1e3 * args.learn_rows / rate:8.2f} ms/step", flush=True)


if __name__ == "__main__":
    main()
