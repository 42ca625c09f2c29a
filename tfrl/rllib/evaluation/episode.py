"""Classic `ray.rllib.evaluation.episode`."""
from tfrl.rollout.episode import Episode

MultiAgentEpisode = Episode  # the classic name; tfrl's Episode covers single and multi-agent

__all__ = ["Episode", "MultiAgentEpisode"]
