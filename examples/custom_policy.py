"""A policy-gradient (REINFORCE) policy declared with build_tf_policy, trained on CartPole-v1.

Everything runs in one process: a few CartPole environments stepped in a simple loop, the
policy's postprocessor adds discounted returns, and one gradient step per iteration.

    python examples/custom_policy.py --iterations 40
"""
import argparse

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.policy import SampleBatch, build_tf_policy, compute_gae_for_sample_batch, concat_samples

# ---- the policy definition -------------------------------------------------------------


def pg_loss(policy, model, dist_class, train_batch):
    logits, _ = model({"obs": train_batch[SampleBatch.OBS]})
    action_dist = dist_class(logits, model)
    returns = train_batch[SampleBatch.ADVANTAGES]
    # normalised returns: a baseline-free variance reduction
    advantages = (returns - tf.reduce_mean(returns)) / (tf.math.reduce_std(returns) + 1e-8)
    policy.policy_entropy = tf.reduce_mean(action_dist.entropy())
    return -tf.reduce_mean(action_dist.logp(train_batch[SampleBatch.ACTIONS]) * advantages)


PGPolicy = build_tf_policy(
    "PGPolicy",
    loss_fn=pg_loss,
    get_default_config=lambda: {"use_gae": False, "use_critic": False, "gamma": 0.99,
                                "lr": 0.01, "model": {"fcnet_hiddens": [32]}},
    postprocess_fn=compute_gae_for_sample_batch,
    stats_fn=lambda policy, batch: {"entropy": policy.policy_entropy},
)

# ---- a minimal single-process training loop ---------------------------------------------


def collect(policy, envs, observations, episode_ids, next_episode_id, steps):
    """Step every env `steps` times; returns postprocessed fragments and episode returns."""
    rows = [{k: [] for k in ("obs", "actions", "rewards", "new_obs", "terminateds",
                             "truncateds", "eps_id")} for _ in envs]
    finished_returns = []
    for _ in range(steps):
        actions, _, _ = policy.compute_actions(np.stack(observations))
        for i, env in enumerate(envs):
            new_obs, reward, terminated, truncated, _ = env.step(int(actions[i]))
            for key, value in (("obs", observations[i]), ("actions", actions[i]),
                               ("rewards", reward), ("new_obs", new_obs),
                               ("terminateds", terminated), ("truncateds", truncated),
                               ("eps_id", episode_ids[i])):
                rows[i][key].append(value)
            env.episode_return += reward
            if terminated or truncated:
                finished_returns.append(env.episode_return)
                env.episode_return = 0.0
                new_obs, _ = env.reset()
                episode_ids[i], next_episode_id = next_episode_id, next_episode_id + 1
            observations[i] = new_obs
    fragments = [policy.postprocess_trajectory(SampleBatch(r)) for r in rows]
    return concat_samples(fragments), finished_returns, next_episode_id


def main(num_iters: int = 40, num_envs: int = 8, steps_per_iter: int = 100, seed: int = 0,
         verbose: bool = True):
    """Train and return the list of mean episode returns per iteration."""
    np.random.seed(seed)
    tf.random.set_seed(seed)
    envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    observations = []
    for i, env in enumerate(envs):
        obs, _ = env.reset(seed=seed + i)
        env.episode_return = 0.0
        observations.append(obs)
    policy = PGPolicy(envs[0].observation_space, envs[0].action_space, {"seed": seed})
    episode_ids, next_id = list(range(num_envs)), num_envs
    history = []
    for iteration in range(num_iters):
        batch, returns, next_id = collect(policy, envs, observations, episode_ids, next_id,
                                          steps_per_iter)
        stats = policy.learn_on_batch(batch)
        mean_return = float(np.mean(returns)) if returns else float("nan")
        history.append(mean_return)
        if verbose:
            print(f"iter {iteration:3d}  mean_return {mean_return:7.2f}  "
                  f"loss {stats['total_loss']:+.3f}  entropy {stats['entropy']:.3f}")
    return history


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.iterations, seed=args.seed)
