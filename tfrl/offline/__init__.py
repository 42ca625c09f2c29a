"""Offline data: recording experience to files and learning or evaluating from them.

Where it sits: a `RolloutWorker` samples from an `InputReader` (input_reader.py; the envs,
recorded files, a replay table, or a mix, chosen in sources.py) and hands every batch it
produces to an `OutputWriter` (output_writer.py; TFRecord, tfrecord_writer.py, or RLlib-classic
JSON lines, json_writer.py; chosen in recording.py). Batches read from files can be judged
off-policy (off_policy_estimator.py). A learner can also read recorded files directly through
tf.data (dataset.py). The record layout is batch_record.py's; the config keys are
OfflineSettings (settings.py).
"""
from tfrl.offline.dataset import offline_dataset
from tfrl.offline.input_reader import FileInput, InputReader, SamplerInput, resolve_input_files
from tfrl.offline.mixed_input import MixedInput
from tfrl.offline.off_policy_estimator import (DirectMethod, DoublyRobust, ImportanceSampling,
                                               OffPolicyEstimator, WeightedImportanceSampling)
from tfrl.offline.output_writer import OutputWriter
from tfrl.offline.recording import make_output_writer, record_episodes
from tfrl.offline.settings import OfflineSettings
from tfrl.offline.sources import make_input_reader

__all__ = ["InputReader", "SamplerInput", "FileInput", "MixedInput", "make_input_reader",
           "resolve_input_files", "OutputWriter", "make_output_writer", "OffPolicyEstimator",
           "ImportanceSampling", "WeightedImportanceSampling", "DoublyRobust", "DirectMethod",
           "OfflineSettings", "record_episodes",
           "offline_dataset"]
