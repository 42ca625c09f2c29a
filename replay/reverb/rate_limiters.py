"""Reverb's `rate_limiters` module: the service's rate limiters under Reverb's names (`replay.reverb`)."""
from replay.rate_limiters import MinSize, Queue, RateLimiter, RateLimiterInfo, SampleToInsertRatio, Stack

__all__ = ["MinSize", "Queue", "RateLimiter", "RateLimiterInfo", "SampleToInsertRatio", "Stack"]
