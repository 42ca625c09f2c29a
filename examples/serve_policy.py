"""Serving a trained policy: load the exported SavedModel with plain TensorFlow (no tfrl) and act.

    tfrl train --run PPO --env CartPole-v1 --stop '{"episode_reward_mean": 450}'
    python examples/serve_policy.py logs/<experiment>/exported_model --episodes 5

The SavedModel's `serving_default` signature takes a batch of raw observations and returns
`actions` (sampled), `deterministic_actions`, `action_logp` and, for actor-critic policies,
`vf_preds`. Any TensorFlow Serving deployment can load the same directory.
"""
import argparse

import gymnasium as gym
import numpy as np
import tensorflow as tf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export_dir")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args()

    serve = tf.saved_model.load(args.export_dir).signatures["serving_default"]
    print("outputs:", sorted(serve.structured_outputs))
    env = gym.make(args.env)
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=episode)
        done, total = False, 0.0
        while not done:
            out = serve(observations=tf.constant(np.asarray(obs, np.float32)[None]))
            key = "deterministic_actions" if "deterministic_actions" in out else "actions"
            obs, reward, terminated, truncated, _ = env.step(int(out[key].numpy()[0]))
            total += float(reward)
            done = terminated or truncated
        print(f"episode {episode}: return {total:.0f}")


if __name__ == "__main__":
    main()
