"""CQL: the penalty against a hand computation, its effect on the critics against plain SAC on
the same data, behaviour cloning's phase, and training from recorded files through a trainer."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.cql import DEFAULT_CONFIG, CQLTFPolicy
from tfrl.agents.cql.cql_policy import cql_penalty
from tfrl.agents.sac import DEFAULT_CONFIG as SAC_CONFIG
from tfrl.agents.sac import SACTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.policy import SampleBatch

from tests.tfrl.agents.agent_helpers import trainer_config

OBS_SPACE = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def test_cql_penalty_matches_a_hand_computed_case():
    rng = np.random.default_rng(0)
    b, n = 3, 4
    q_random, q_current, q_next = (rng.normal(size=(b, n)) for _ in range(3))
    logp_current, logp_next = rng.normal(size=(b, n)), rng.normal(size=(b, n))
    q_data = rng.normal(size=b)
    log_u, temperature, weight = -np.log(4.0), 0.7, 5.0
    stacked = np.concatenate([q_random - log_u, q_current - logp_current, q_next - logp_next], 1)
    expected = weight * np.mean(
        temperature * np.log(np.exp(stacked / temperature).sum(1)) - q_data)
    got = cql_penalty(*(tf.constant(x, tf.float32) for x in (q_random, q_current, logp_current,
                                                             q_next, logp_next, q_data)),
                      log_u, temperature, weight)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)


def narrow_data(rng, n=256):
    """Transitions whose actions all lie near 0.5: most of the action range is never seen."""
    return SampleBatch({
        SampleBatch.OBS: rng.normal(size=(n, 3)).astype(np.float32),
        SampleBatch.NEXT_OBS: rng.normal(size=(n, 3)).astype(np.float32),
        SampleBatch.ACTIONS: rng.normal(0.5, 0.05, size=(n, 1)).astype(np.float32),
        SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
        SampleBatch.TERMINATEDS: np.zeros(n, bool),
        SampleBatch.N_STEPS: np.ones(n, np.int64),
        SampleBatch.PRIO_WEIGHTS: np.ones(n, np.float32)})


def q_gap(policy, batch, rng):
    """mean Q(s, a_data) - mean Q(s, a uniform in the bounds), first critic."""
    model = policy.model
    obs = tf.constant(batch[SampleBatch.OBS])
    normalize = lambda a: a / 2.0  # noqa: E731 - the bounds are [-2, 2]
    q_data = model.q_values(obs, normalize(tf.constant(batch[SampleBatch.ACTIONS])))[0]
    uniform = rng.uniform(-2, 2, size=(len(batch[SampleBatch.OBS]), 1)).astype(np.float32)
    q_uniform = model.q_values(obs, normalize(tf.constant(uniform)))[0]
    return float(tf.reduce_mean(q_data) - tf.reduce_mean(q_uniform))


def test_the_penalty_lowers_q_of_actions_the_data_never_took_where_sac_does_not():
    rates = {"actor_learning_rate": 3e-3, "critic_learning_rate": 3e-3,
             "entropy_learning_rate": 3e-3}
    config = dict(actor_hiddens=[16], critic_hiddens=[16], seed=3, optimization=rates)
    gaps = {}
    for name, cls, defaults in (("sac", SACTFPolicy, SAC_CONFIG), ("cql", CQLTFPolicy, DEFAULT_CONFIG)):
        tf.random.set_seed(3)
        policy = cls(OBS_SPACE, ACTION_SPACE, trainer_config(defaults, **config))
        batch = narrow_data(np.random.default_rng(1))
        for _ in range(300):
            stats = policy.learn_on_batch(batch)
        gaps[name] = q_gap(policy, batch, np.random.default_rng(2))
        if name == "cql":
            assert np.isfinite(stats["cql_loss"]), stats
    # seen: about 3.5 against 0.13 (SAC has no reason to prefer the data's actions)
    assert gaps["cql"] > gaps["sac"] + 1.0, gaps


def test_behaviour_cloning_phase_makes_the_data_actions_likely():
    from tfrl.agents.sac.sac_policy import squashed_gaussian

    batch = narrow_data(np.random.default_rng(4))
    rates = {"actor_learning_rate": 3e-3, "critic_learning_rate": 3e-3,
             "entropy_learning_rate": 3e-3}
    likelihood = {}
    for bc_iters in (0, 1000):
        tf.random.set_seed(4)
        policy = CQLTFPolicy(OBS_SPACE, ACTION_SPACE, trainer_config(
            DEFAULT_CONFIG, actor_hiddens=[16], critic_hiddens=[16], bc_iters=bc_iters, seed=4,
            optimization=rates))
        for _ in range(200):
            policy.learn_on_batch(batch)
        outputs, _ = policy.model({SampleBatch.OBS: tf.constant(batch[SampleBatch.OBS])})
        logp = squashed_gaussian(policy, outputs).logp(batch[SampleBatch.ACTIONS])
        likelihood[bc_iters] = float(tf.reduce_mean(logp))
    # cloning fits the narrow data; the entropy-seeking SAC actor stays wide
    assert likelihood[1000] > likelihood[0] + 1.0, likelihood


@pytest.mark.parametrize("bad", [{"min_q_weight": 0}, {"num_actions": 0}, {"temperature": -1.0},
                                 {"bc_iters": -1}])
def test_bad_settings_are_refused(bad):
    from tfrl.agents.cql.cql import validate_config

    with pytest.raises(InvalidConfigError, match="CQL"):
        validate_config(trainer_config(DEFAULT_CONFIG, **bad))


def test_cql_trains_from_whole_recorded_episodes_and_evaluates_in_the_env(ray_session, tmp_path):
    """The recording holds whole 200-step episodes, far more rows per batch than
    rollout_fragment_length: the replay table must still take them while the learner waits."""
    from tfrl.agents.cql.cql import CQLTrainer
    from tfrl.rollout import RolloutWorker

    small = {"actor_hiddens": [16], "critic_hiddens": [16], "train_batch_size": 32,
             "learning_starts": 64, "rollout_fragment_length": 8, "timesteps_per_iteration": 100}
    # recorded by a SAC rollout worker, as a SAC trainer's workers record (without building the
    # trainer's learner, which nothing here uses)
    recorder = RolloutWorker("Pendulum-v1", SACTFPolicy, trainer_config(
        SAC_CONFIG, **small, model=SAC_CONFIG["model"], output=str(tmp_path / "data"),
        batch_mode="complete_episodes"))
    try:
        assert [recorder.sample().count for _ in range(2)] == [200, 200]
    finally:
        recorder.stop()
    trainer = CQLTrainer(env="Pendulum-v1", config=dict(
        small, input=str(tmp_path / "data"), evaluation_interval=1, evaluation_num_episodes=1,
        evaluation_num_workers=0, evaluation_config={"explore": False}))
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    learner = result["info"]["learner"]["default_policy"]
    assert np.isfinite(learner["cql_loss"]) and np.isfinite(learner["critic_loss"])
    assert result["info"]["num_steps_trained"] > 0
    assert result["evaluation"]["episodes_this_iter"] == 1
    assert result["evaluation"]["episode_len_mean"] == 200  # a Pendulum episode, played


def test_the_pendulum_cql_example_is_a_valid_offline_config():
    from tfrl.agents.cql.cql import CQLTrainer, validate_config
    from tfrl.cli import load_experiment_file
    from tfrl.config import merge_config

    experiment = load_experiment_file("pendulum-cql")
    assert experiment["run"] == "CQL" and experiment["config"]["input"] == "data/pendulum-sac"
    assert experiment["stop"]["evaluation/episode_reward_mean"] == -300
    validate_config(merge_config(CQLTrainer.default_config(), experiment["config"]))
