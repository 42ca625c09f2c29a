"""Classic `ray.rllib.agents.pg.pg_tf_policy` (Ray 0.8.1 to 1.x)."""
from tfrl.agents.pg.pg_policy import (PGTFPolicy, pg_loss_stats, pg_tf_loss,
                                      postprocess_pg_returns)

__all__ = ["PGTFPolicy", "pg_tf_loss", "postprocess_pg_returns", "pg_loss_stats"]
