"""Classic `ray.rllib.agents.impala.vtrace_tf_policy` (Ray 0.8.1 to 1.x): IMPALA's V-trace TF policy."""
from tfrl.agents.impala.impala_policy import VTraceTFPolicy

__all__ = ["VTraceTFPolicy"]
