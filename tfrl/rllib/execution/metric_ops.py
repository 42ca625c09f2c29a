"""Classic `ray.rllib.execution.metric_ops` (`tfrl.execution.metric_ops`)."""
from tfrl.execution.metric_ops import (CollectMetrics, OncePerTimeInterval,
                                       OncePerTimestepsElapsed, StandardMetricsReporting)

__all__ = ["StandardMetricsReporting", "CollectMetrics", "OncePerTimeInterval",
           "OncePerTimestepsElapsed"]
