"""Every algorithm's build_trainer declaration imports, merges its defaults, and validates."""
import copy

import pytest
import yaml

from tfrl.registry import ALGORITHMS, get_trainer_class
from tfrl.config import merge_config
from tfrl.errors import InvalidConfigError
from tfrl.config import COMMON_CONFIG
from tfrl.trainer import Trainer

ALGORITHM_KEYS = {
    "PG": ("train_batch_size", "sgd_minibatch_size", "num_sgd_iter", "lr_schedule"),
    "A2C": ("vf_loss_coeff", "entropy_coeff", "grad_clip", "sgd_minibatch_size", "num_sgd_iter"),
    "A3C": ("vf_loss_coeff", "entropy_coeff", "grad_clip", "grads_per_step"),
    "PPO": ("clip_param", "vf_clip_param", "kl_coeff", "kl_target", "num_sgd_iter",
            "sgd_minibatch_size", "shuffle_sequences", "simple_optimizer"),
    "DQN": ("buffer_size", "learning_starts", "prioritized_replay", "prioritized_replay_alpha",
            "prioritized_replay_beta", "final_prioritized_replay_beta",
            "prioritized_replay_beta_annealing_timesteps", "prioritized_replay_eps",
            "training_intensity", "target_network_update_freq", "n_step", "double_q",
            "dueling", "exploration_config"),
    "IMPALA": ("vtrace_clip_rho_threshold", "vtrace_clip_pg_rho_threshold", "learner_queue_size",
               "broadcast_interval", "max_sample_requests_in_flight_per_worker", "minibatch_buffer_size",
               "num_sgd_iter"),
    "APPO": ("clip_param", "vtrace_clip_rho_threshold", "learner_queue_size", "broadcast_interval"),
    "MARWIL": ("beta", "vf_coeff", "moving_average_sqd_adv_norm_start",
               "moving_average_sqd_adv_norm_update_rate", "postprocess_inputs"),
    "BC": ("beta", "vf_coeff", "postprocess_inputs"),
    "DDPG": ("actor_hiddens", "critic_hiddens", "actor_lr", "critic_lr", "tau", "twin_q",
             "policy_delay", "smooth_target_policy", "target_noise", "target_noise_clip",
             "exploration_config", "buffer_size", "learning_starts", "prioritized_replay",
             "n_step", "training_intensity"),
    "TD3": ("twin_q", "policy_delay", "smooth_target_policy", "target_noise",
            "target_noise_clip", "tau", "exploration_config", "buffer_size"),
    "SAC": ("actor_hiddens", "critic_hiddens", "optimization", "initial_alpha",
            "target_entropy", "tau", "twin_q", "exploration_config", "buffer_size",
            "learning_starts", "prioritized_replay", "n_step", "training_intensity"),
    "CQL": ("min_q_weight", "temperature", "num_actions", "bc_iters", "optimization",
            "initial_alpha", "twin_q", "buffer_size", "learning_starts"),
    "APEX_DDPG": ("num_replay_shards", "replay_shard_addresses", "max_weight_sync_delay",
                  "learner_steps_per_call", "per_worker_exploration", "worker_epsilon",
                  "worker_epsilon_alpha", "actor_hiddens", "critic_hiddens", "tau",
                  "exploration_config", "n_step"),
    "APEX": ("num_replay_shards", "replay_shard_addresses", "max_weight_sync_delay",
             "learner_steps_per_call", "per_worker_exploration", "worker_epsilon",
             "worker_epsilon_alpha", "worker_side_prioritization", "target_network_update_freq",
             "n_step", "prioritized_replay"),
    "ES": ("noise_stdev", "noise_size", "stepsize", "l2_coeff", "episodes_per_batch",
           "num_aggregators", "aggregation_fan_in", "eval_prob"),
    "ARS": ("noise_stdev", "rollouts_used", "stepsize", "num_aggregators", "aggregation_fan_in"),
}
# the continuous-control algorithms need a Box action space
CONTINUOUS = {"DDPG", "TD3", "SAC", "CQL", "APEX_DDPG"}
# derivative-free: their policy is a flat parameter vector, not a build_tf_policy policy
# (tests/tfrl/agents/test_es.py covers it)
DERIVATIVE_FREE = {"ES", "ARS"}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_trainer_class_imports_and_merges_its_default_config(name):
    trainer_cls = get_trainer_class(name)
    assert issubclass(trainer_cls, Trainer)
    defaults = trainer_cls.default_config()
    assert set(COMMON_CONFIG) <= set(defaults)
    for key in ALGORITHM_KEYS[name]:
        assert key in defaults, key
    merged = merge_config(defaults, {"lr": 0.123, "model": {"fcnet_hiddens": [7]}})
    assert merged["lr"] == 0.123
    assert merged["model"]["fcnet_hiddens"] == [7]
    assert merged["model"]["fcnet_activation"] == defaults["model"]["fcnet_activation"]
    with pytest.raises(InvalidConfigError, match="did you mean 'gamma'"):
        merge_config(defaults, {"gama": 0.9})


@pytest.mark.parametrize("name", sorted(set(ALGORITHMS) - DERIVATIVE_FREE))
def test_policy_defaults_build_a_policy_directly(name):
    """The policy classes take their trainer's defaults, so they work outside a trainer."""
    import gymnasium as gym

    policy_cls = get_trainer_class(name)._policy
    env = gym.make("Pendulum-v1" if name in CONTINUOUS else "CartPole-v1")
    policy = policy_cls(env.observation_space, env.action_space, {"model": {"fcnet_hiddens": [4]}})
    for key in ALGORITHM_KEYS[name]:
        if key in ("grads_per_step", "simple_optimizer", "sgd_minibatch_size", "num_sgd_iter",
                   "num_replay_shards", "replay_shard_addresses", "max_weight_sync_delay",
                   "learner_steps_per_call", "per_worker_exploration", "worker_epsilon",
                   "worker_epsilon_alpha"):
            continue  # optimizer settings (A2C shares A3C's policy and its defaults)
        assert key in policy.config, key


@pytest.mark.parametrize("name", ["PG", "A2C", "PPO"])
def test_on_policy_validation_fits_fragments_into_the_train_batch(name):
    from importlib import import_module

    module = import_module(ALGORITHMS[name][0])
    config = copy.deepcopy(get_trainer_class(name).default_config())
    config.update(num_workers=2, num_envs_per_worker=4, rollout_fragment_length=200,
                  train_batch_size=256, sgd_minibatch_size=64)
    module.validate_config(config)
    assert config["rollout_fragment_length"] == 32  # 2 workers x 4 envs x 32 = 256
    config.update(train_batch_size=260, rollout_fragment_length=32)
    with pytest.raises(InvalidConfigError, match="multiple of one sampling round"):
        module.validate_config(config)
    config.update(train_batch_size=256, sgd_minibatch_size=512)
    with pytest.raises(InvalidConfigError, match="sgd_minibatch_size"):
        module.validate_config(config)
    # recorded input comes in the batches it was recorded in: no round to fit
    config.update(train_batch_size=260, sgd_minibatch_size=64, input="/data/recorded")
    module.validate_config(config)
    assert config["rollout_fragment_length"] == 32


def test_sgd_minibatch_defaults_to_the_whole_train_batch_for_pg_and_a2c():
    from tfrl.agents.a3c.a2c import validate_config as validate_a2c
    from tfrl.agents.pg.pg import validate_config as validate_pg

    for name, validate in (("PG", validate_pg), ("A2C", validate_a2c)):
        config = copy.deepcopy(get_trainer_class(name).default_config())
        validate(config)
        assert config["sgd_minibatch_size"] == config["train_batch_size"]


def test_ppo_validation_refuses_bad_coefficients():
    from tfrl.agents.ppo.ppo import validate_config

    for key, value in (("entropy_coeff", -0.1), ("clip_param", 0.0), ("lambda", 1.5)):
        config = copy.deepcopy(get_trainer_class("PPO").default_config())
        config[key] = value
        with pytest.raises(InvalidConfigError, match=key):
            validate_config(config)


def test_bc_is_marwil_with_beta_zero():
    bc, marwil = get_trainer_class("BC"), get_trainer_class("MARWIL")
    assert bc._policy is marwil._policy
    assert bc.default_config()["beta"] == 0.0 and marwil.default_config()["beta"] == 1.0
    assert {k: v for k, v in bc.default_config().items() if k != "beta"} == {
        k: v for k, v in marwil.default_config().items() if k != "beta"}
    from tfrl.agents.marwil.marwil import validate_config

    config = copy.deepcopy(marwil.default_config())
    config["beta"] = -1.0
    with pytest.raises(InvalidConfigError, match="beta must be a number >= 0"):
        validate_config(config)


def test_with_updates_swaps_a_hook_and_keeps_the_rest():
    ppo = get_trainer_class("PPO")
    variant = ppo.with_updates(name="PPOVariant", make_policy_optimizer=lambda *a: None)
    assert variant.trainer_name == "PPOVariant"
    assert variant._policy is ppo._policy
    assert variant.default_config() == ppo.default_config()


@pytest.mark.parametrize("algorithm", ["ppo", "pg", "a2c", "dqn", "impala", "appo", "apex"])
def test_tuned_examples_are_valid_configs(algorithm):
    from importlib import resources

    text = resources.files("tfrl.tuned_examples").joinpath(f"cartpole-{algorithm}.yaml")
    (name, spec), = yaml.safe_load(text.read_text()).items()
    assert spec["env"] == "CartPole-v1"
    assert spec["stop"]["episode_reward_mean"] >= 450
    trainer_cls = get_trainer_class(spec["run"])
    config = merge_config(trainer_cls.default_config(), spec["config"])
    from importlib import import_module

    import_module(ALGORITHMS[spec["run"]][0]).validate_config(config)


@pytest.mark.parametrize("algorithm", ["bc", "marwil"])
def test_offline_tuned_examples_read_recorded_data_and_stop_on_the_greedy_return(algorithm):
    from importlib import resources

    text = resources.files("tfrl.tuned_examples").joinpath(f"cartpole-{algorithm}.yaml")
    (name, spec), = yaml.safe_load(text.read_text()).items()
    assert spec["run"] == algorithm.upper() and spec["env"] == "CartPole-v1"
    assert spec["stop"]["evaluation/episode_reward_mean"] >= 450
    config = merge_config(get_trainer_class(spec["run"]).default_config(), spec["config"])
    assert config["input"] != "sampler" and config["evaluation_config"]["explore"] is False
    from importlib import import_module

    import_module(ALGORITHMS[spec["run"]][0]).validate_config(config)
