"""Classic `ray.rllib.execution.rollout_ops` (`tfrl.execution.rollout_ops`)."""
from tfrl.execution.rollout_ops import (ConcatBatches, ParallelRollouts, SelectExperiences,
                                        StandardizeFields)

__all__ = ["ParallelRollouts", "ConcatBatches", "SelectExperiences", "StandardizeFields"]
