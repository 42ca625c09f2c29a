"""Classic `ray.rllib.agents.impala.vtrace_policy` (Ray 0.8): IMPALA's V-trace TF policy."""
from tfrl.agents.impala.impala_policy import VTraceTFPolicy

__all__ = ["VTraceTFPolicy"]
