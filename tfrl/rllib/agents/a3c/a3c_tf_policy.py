"""Classic `ray.rllib.agents.a3c.a3c_tf_policy` (Ray 0.8.1 to 1.x)."""
from tfrl.agents.a3c.a3c_policy import A3CTFPolicy, actor_critic_loss, actor_critic_stats

__all__ = ["A3CTFPolicy", "actor_critic_loss", "actor_critic_stats"]
