"""The learner side of tfrl: a MirroredStrategy learner fed by tf.data (usually a
`replay.ReplayDataset`) and the publishing of its weights to rollout actors."""
from tfrl.learner.mirrored_learner import (MirroredLearner, StepOutput, default_strategy, mean_stats,
                                           mirrored_strategy)
from tfrl.learner.priority_updates import PriorityUpdater
from tfrl.learner.weights_publisher import (RayWeightsPublisher, ReplayWeightsPublisher, ReplayWeightsReader,
                                            variable_container_table)

__all__ = ["MirroredLearner", "StepOutput", "default_strategy", "mean_stats", "mirrored_strategy", "PriorityUpdater",
           "RayWeightsPublisher", "ReplayWeightsPublisher", "ReplayWeightsReader",
           "variable_container_table"]
