"""Classic `ray.rllib.examples.env`: helper envs of classic RLlib's examples (see multi_agent)."""
