"""Typed component settings: read from each algorithm's merged DEFAULT_CONFIG with no defaults of
their own, and refusing ill-typed or out-of-range values with an error naming the key."""
import dataclasses

import pytest

from tfrl.registry import get_trainer_class
from tfrl.errors import InvalidConfigError
from tfrl.optimizers.settings import (AsyncGradientsSettings, LearnerSettings, SyncReplaySettings,
                                      SyncSamplesSettings)
from tfrl.offline.settings import OfflineSettings
from tfrl.rollout.settings import WorkerSettings
from tfrl.serving_export import ExportSettings
from tfrl.config import COMMON_CONFIG

# the settings each algorithm's components build from its config
SETTINGS_OF = {
    "PG": (WorkerSettings, SyncSamplesSettings),
    "A2C": (WorkerSettings, SyncSamplesSettings),
    "PPO": (WorkerSettings, SyncSamplesSettings, LearnerSettings),
    "A3C": (WorkerSettings, AsyncGradientsSettings),
    "DQN": (WorkerSettings, SyncReplaySettings, LearnerSettings, OfflineSettings),
    "MARWIL": (WorkerSettings, SyncSamplesSettings, OfflineSettings, ExportSettings),
    "BC": (WorkerSettings, SyncSamplesSettings, OfflineSettings, ExportSettings),
}


@pytest.mark.parametrize("algorithm", sorted(SETTINGS_OF))
def test_every_settings_class_reads_each_value_from_the_algorithms_defaults(algorithm):
    defaults = get_trainer_class(algorithm).default_config()
    for settings_class in SETTINGS_OF[algorithm]:
        settings = settings_class.from_config(defaults)
        for field in dataclasses.fields(settings_class):
            assert field.metadata["doc"], (settings_class.__name__, field.name)
            assert field.name in defaults, (settings_class.__name__, field.name)
            assert getattr(settings, field.name) == defaults[field.name], field.name
        # a different value in the config is the value the component gets
        changed = dict(defaults)
        key = dataclasses.fields(settings_class)[0].name
        value = defaults[key]
        changed[key] = value + 1 if isinstance(value, int) and not isinstance(value, bool) else value
        assert getattr(settings_class.from_config(changed), key) == changed[key]


def test_dqn_replay_settings_are_dqns_defaults_not_copies_of_them():
    from tfrl.agents.dqn import DEFAULT_CONFIG

    config = dict(DEFAULT_CONFIG, learning_starts=7, buffer_size=123, prioritized_replay_alpha=0.3,
                  prioritized_replay_beta=0.2, prioritized_replay_eps=1e-3)
    settings = SyncReplaySettings.from_config(config)
    assert (settings.learning_starts, settings.buffer_size, settings.prioritized_replay_alpha,
            settings.prioritized_replay_beta, settings.prioritized_replay_eps) == (
        7, 123, 0.3, 0.2, 1e-3)


def test_a_partial_config_takes_common_configs_values_for_the_keys_it_lacks():
    settings = WorkerSettings.from_config({"rollout_fragment_length": 7})
    assert settings.rollout_fragment_length == 7
    assert settings.clip_actions is COMMON_CONFIG["clip_actions"] is True
    assert settings.batch_mode == COMMON_CONFIG["batch_mode"]


def test_a_key_only_an_algorithm_defines_must_be_in_the_config():
    with pytest.raises(InvalidConfigError, match="'buffer_size' is missing"):
        SyncReplaySettings.from_config({})


@pytest.mark.parametrize("settings_class, key, value, expected", [
    (WorkerSettings, "rollout_fragment_length", "200", "an int"),
    (WorkerSettings, "num_envs_per_worker", True, "an int"),
    (WorkerSettings, "num_envs_per_worker", 0, ">= 1"),
    (WorkerSettings, "batch_mode", "whole", "'truncate_episodes' or 'complete_episodes'"),
    (WorkerSettings, "clip_actions", "yes", "True or False"),
    (WorkerSettings, "num_cpus_per_worker", -1, ">= 0"),
    (SyncSamplesSettings, "train_batch_size", -32, ">= 1"),
    (SyncSamplesSettings, "sgd_minibatch_size", 12.5, "an int or None"),
    (SyncReplaySettings, "learning_starts", "1000", "an int"),
    (SyncReplaySettings, "prioritized_replay_eps", 0.0, "> 0"),
    (SyncReplaySettings, "prioritized_replay_beta", 1.5, "<= 1"),
    (LearnerSettings, "num_learner_devices", "all", "'auto' or an int"),
    (AsyncGradientsSettings, "grads_per_step", 0, ">= 1"),
    (OfflineSettings, "output_format", "csv", "'tfrecord' or 'json'"),
    (OfflineSettings, "output_max_file_size", 0, ">= 1"),
    (OfflineSettings, "input", 3, "a string or a list or a dict"),
    (OfflineSettings, "input_skip_corrupt", "yes", "True or False"),
    (ExportSettings, "export_every", 0, ">= 1"),
])
def test_ill_typed_or_out_of_range_values_fail_naming_the_key(settings_class, key, value,
                                                               expected):
    config = dict(get_trainer_class("DQN").default_config(), sgd_minibatch_size=None,
                  num_sgd_iter=1, grads_per_step=10)
    config[key] = value
    with pytest.raises(InvalidConfigError) as raised:
        settings_class.from_config(config)
    message = str(raised.value)
    assert repr(key) in message and expected in message and repr(value) in message


def test_whole_floats_count_as_ints_and_ints_as_floats():
    settings = WorkerSettings.from_config({"rollout_fragment_length": 50.0, "clip_rewards": 1})
    assert settings.rollout_fragment_length == 50 and type(settings.rollout_fragment_length) is int
    assert settings.clip_rewards == 1.0


def test_a_trainer_refuses_an_ill_typed_value_before_it_starts_anything():
    trainer_cls = get_trainer_class("PG")
    with pytest.raises(InvalidConfigError, match="'train_batch_size' must be an int"):
        trainer_cls(config={"env": "CartPole-v1", "num_workers": 0, "train_batch_size": "200"})
