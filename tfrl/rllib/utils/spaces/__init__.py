"""Classic `ray.rllib.utils.spaces`: the extra gymnasium spaces and space helpers of
`tfrl.spaces`, under classic RLlib's module names (repeated, simplex, flexdict, space_utils)."""
