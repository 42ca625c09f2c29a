"""The learner side of tfrl: a MirroredStrategy learner fed by tf.data (usually a
`replay.ReplayDataset`) and the publishing of its weights to rollout actors."""
from tfrl.learner.learner import DatasetLearner, KerasTrainee, Learner, Trainee, as_trainee
from tfrl.learner.mirrored_learner import (MirroredLearner, StepOutput, default_strategy, mean_stats,
                                           mirrored_strategy)
from tfrl.learner.priority_updates import PriorityUpdater
from tfrl.policy.replica_scaling import replica_share, scaled_gradients, weight_by_share
from tfrl.learner.weights_publisher import (RayWeightsPublisher, ReplayWeightsPublisher, ReplayWeightsReader,
                                            variable_container_table)

__all__ = ["Learner", "DatasetLearner", "Trainee", "KerasTrainee", "as_trainee", "replica_share",
           "scaled_gradients", "weight_by_share", "MirroredLearner", "StepOutput", "default_strategy",
           "mean_stats", "mirrored_strategy", "PriorityUpdater", "RayWeightsPublisher",
           "ReplayWeightsPublisher", "ReplayWeightsReader", "variable_container_table"]
