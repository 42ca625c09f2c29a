"""Classic `ray.rllib.agents.a3c.a3c_policy` (Ray 0.8.0)."""
from tfrl.agents.a3c.a3c_policy import A3CTFPolicy, actor_critic_loss, actor_critic_stats

__all__ = ["A3CTFPolicy", "actor_critic_loss", "actor_critic_stats"]
