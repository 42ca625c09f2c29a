"""RolloutWorker in one process: fragments, gymnasium semantics, filters, clipping, callbacks,
errors, learning entry points and state, with a real build_tf_policy policy on real envs."""
import gymnasium as gym
import numpy as np
import pytest
from rollout_test_policies import DiscretePGPolicy, FragmentPGPolicy, PGPolicy

from tfrl import errors, register_env
from tfrl.rollout import DefaultCallbacks, RolloutWorker

pytestmark = pytest.mark.timeout(120)


def short_cartpole(env_config):
    return gym.make("CartPole-v1", max_episode_steps=env_config.get("horizon", 5))


register_env("ShortCartPole", short_cartpole)


def episode_pieces(batch):
    return batch.split_by_episode()


def test_truncate_mode_returns_fragment_times_envs_rows_with_gymnasium_semantics():
    worker = RolloutWorker("ShortCartPole", PGPolicy,
                           {"num_envs_per_worker": 3, "rollout_fragment_length": 12,
                            "env_config": {"horizon": 5}, "gamma": 0.9})
    batch = worker.sample()
    assert batch.count == 36
    for column in ("obs", "new_obs", "actions", "rewards", "terminateds", "truncateds",
                   "action_logp", "vf_preds", "advantages", "value_targets", "eps_id", "t"):
        assert column in batch
    policy = worker.get_policy()
    pieces = episode_pieces(batch)
    cut = 0
    for piece in pieces:
        # within a piece, each row's next observation is the following row's observation
        np.testing.assert_array_equal(piece["obs"][1:], piece["new_obs"][:-1])
        assert not piece["terminateds"][:-1].any() and not piece["truncateds"][:-1].any()
        assert not (piece["terminateds"][-1] and piece["truncateds"][-1])
        last_v = policy.compute_values(piece["new_obs"][-1:])[0]
        expected_last_target = piece["rewards"][-1] + (
            0.0 if piece["terminateds"][-1] else 0.9 * last_v)
        assert piece["value_targets"][-1] == pytest.approx(expected_last_target, rel=1e-4, abs=1e-4)
        if piece["truncateds"][-1]:
            assert piece["t"][-1] == 4  # the 5-step time limit, not a termination
        if not (piece["terminateds"][-1] or piece["truncateds"][-1]):
            cut += 1
    assert cut >= 1  # 12 steps over 5-step episodes: every env's last episode is cut
    metrics = worker.get_metrics()
    assert len(metrics) >= 6 and all(m.episode_length <= 5 for m in metrics)
    assert worker.get_metrics() == []  # reported once


def test_cut_episode_continues_with_same_episode_id_in_next_fragment():
    worker = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 3,
                                                  "clip_actions": True})
    first, second = worker.sample(), worker.sample()
    assert not first["terminateds"][-1] and not first["truncateds"][-1]  # cut, not ended
    assert first["eps_id"][-1] == second["eps_id"][0]
    np.testing.assert_array_equal(second["obs"][0], first["new_obs"][-1])
    assert list(second["t"]) == [3, 4, 5]


def test_complete_episodes_mode_returns_only_whole_episodes():
    worker = RolloutWorker("ShortCartPole", PGPolicy,
                           {"num_envs_per_worker": 2, "rollout_fragment_length": 7,
                            "batch_mode": "complete_episodes", "env_config": {"horizon": 5}})
    batch = worker.sample()
    assert batch.count >= 7
    for piece in episode_pieces(batch):
        assert piece["t"][0] == 0
        assert piece["terminateds"][-1] or piece["truncateds"][-1]


def test_complete_episodes_longer_than_the_fragment_carry_over_whole_between_samples():
    worker = RolloutWorker("ShortCartPole", PGPolicy,
                           {"num_envs_per_worker": 3, "rollout_fragment_length": 2,
                            "batch_mode": "complete_episodes", "env_config": {"horizon": 9}})
    seen, lengths = set(), []
    for _ in range(4):
        batch = worker.sample()
        assert batch.count >= 2
        for piece in episode_pieces(batch):
            assert list(piece["t"]) == list(range(piece.count))
            assert piece["terminateds"][-1] or piece["truncateds"][-1]
            np.testing.assert_array_equal(piece["obs"][1:], piece["new_obs"][:-1])
            assert piece["eps_id"][0] not in seen  # no episode is returned twice
            seen.add(piece["eps_id"][0])
            lengths.append(piece.count)
    # every finished episode is in exactly one sample, whole
    assert sorted(m.episode_length for m in worker.get_metrics()) == sorted(lengths)


class RunningTotalsCallbacks(DefaultCallbacks):
    def on_episode_step(self, *, episode, env_index, **kwargs):
        assert episode.env_index == env_index
        episode.user_data.setdefault("totals", []).append(
            (episode.length, episode.total_reward, episode.last_info_for(),
             episode.last_action_for()))

    def on_episode_end(self, *, episode, **kwargs):
        totals = episode.user_data.get("totals", [])
        episode.custom_metrics["lengths_in_order"] = float(
            [t[0] for t in totals] == list(range(1, episode.length)))
        episode.custom_metrics["rewards_in_order"] = float(
            [t[1] for t in totals] == [float(n) for n in range(1, episode.length)])
        episode.custom_metrics["infos_and_actions"] = float(all(
            isinstance(t[2], dict) and t[3] in (0, 1) for t in totals))


def test_on_episode_step_sees_the_running_totals_of_its_own_episode():
    worker = RolloutWorker("ShortCartPole", PGPolicy,
                           {"num_envs_per_worker": 3, "rollout_fragment_length": 20,
                            "callbacks": RunningTotalsCallbacks, "env_config": {"horizon": 6}})
    worker.sample()
    metrics = worker.get_metrics()
    assert len(metrics) >= 9
    for m in metrics:
        assert m.episode_reward == m.episode_length  # CartPole: reward 1 per step
        assert m.custom_metrics == {"lengths_in_order": 1.0, "rewards_in_order": 1.0,
                                    "infos_and_actions": 1.0}


def test_seeds_make_runs_repeatable_per_worker_and_distinct_across_workers():
    config = {"rollout_fragment_length": 20, "seed": 7, "num_envs_per_worker": 2}
    a = RolloutWorker("CartPole-v1", PGPolicy, config, worker_index=1).sample()
    b = RolloutWorker("CartPole-v1", PGPolicy, config, worker_index=1).sample()
    c = RolloutWorker("CartPole-v1", PGPolicy, config, worker_index=2).sample()
    np.testing.assert_array_equal(a["obs"], b["obs"])
    np.testing.assert_array_equal(a["actions"], b["actions"])
    assert not np.array_equal(a["obs"], c["obs"])


def test_mean_std_filter_normalises_observations_and_counts_every_observation():
    # seeded: with few episodes, the later filtered observations' mean is a random quantity
    worker = RolloutWorker("CartPole-v1", PGPolicy,
                           {"rollout_fragment_length": 200, "observation_filter": "MeanStdFilter",
                            "seed": 3})
    batch = worker.sample()
    stat = worker.get_filters()["default_policy"].running_stat
    episodes = len(np.unique(batch["eps_id"]))
    # one observation per step plus one per reset (the first and one after each ended episode)
    assert stat.count == 200 + 1 + int((batch["terminateds"] | batch["truncateds"]).sum())
    assert episodes >= 1
    assert np.abs(batch["obs"][100:].mean(axis=0)).max() < 1.0
    raw = np.asarray(worker.filter_observation(np.zeros(4, np.float32)))
    np.testing.assert_allclose(raw, (0 - stat.mean) / (stat.std + 1e-8), rtol=1e-5, atol=1e-5)


def test_reward_clipping_changes_training_rewards_but_not_reported_returns():
    worker = RolloutWorker("ShortCartPole", PGPolicy,
                           {"rollout_fragment_length": 10, "clip_rewards": 0.25,
                            "env_config": {"horizon": 5}})
    batch = worker.sample()
    assert np.all(batch["rewards"] == 0.25)
    metrics = worker.get_metrics()
    assert metrics and all(m.episode_reward == m.episode_length for m in metrics)


class TinyBoxEnv(gym.Env):
    """Actions must lie in [-0.1, 0.1]; it records the actions it received."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-0.1, 0.1, (1,), np.float32)

    def __init__(self, config=None):
        self.received = []
        self.nan_at = (config or {}).get("nan_at")
        self.crash_at = (config or {}).get("crash_at")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.received.append(np.asarray(action).copy())
        self.t += 1
        if self.crash_at is not None and self.t >= self.crash_at:
            raise RuntimeError("the simulator fell over")
        obs = np.full(2, 0.5, np.float32)
        if self.nan_at is not None and self.t >= self.nan_at:
            obs[1] = np.nan
        return obs, 1.0, False, self.t >= 10, {}


def test_box_actions_are_clipped_or_normalised_for_the_env_but_kept_raw_in_the_batch():
    clipped = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 30,
                                                   "clip_actions": True})
    batch = clipped.sample()
    sent = np.concatenate(clipped.envs[0].received)
    assert np.all(np.abs(sent) <= 0.1 + 1e-7)
    assert np.abs(batch["actions"]).max() > 0.1  # a unit Gaussian leaves the bounds
    np.testing.assert_allclose(sent, np.clip(batch["actions"][:, 0], -0.1, 0.1), rtol=1e-6)

    normalized = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 30,
                                                      "normalize_actions": True})
    batch = normalized.sample()
    sent = np.concatenate(normalized.envs[0].received)
    expected = np.clip(batch["actions"][:, 0], -1, 1) * 0.1
    np.testing.assert_allclose(sent, expected, rtol=1e-5, atol=1e-7)


def test_a_worker_built_without_clip_actions_clips_as_common_config_says():
    from tfrl.config import COMMON_CONFIG

    assert COMMON_CONFIG["clip_actions"] is True
    worker = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 30})
    assert worker.settings.clip_actions is True
    batch = worker.sample()  # the unit Gaussian's actions leave [-0.1, 0.1]: clipped, no error
    sent = np.concatenate(worker.envs[0].received)
    assert np.abs(batch["actions"]).max() > 0.1
    np.testing.assert_allclose(sent, np.clip(batch["actions"][:, 0], -0.1, 0.1), rtol=1e-6)


def test_ill_typed_worker_settings_are_refused_at_construction_naming_the_key():
    with pytest.raises(errors.InvalidConfigError, match="'num_envs_per_worker' must be an int"):
        RolloutWorker("CartPole-v1", PGPolicy, {"num_envs_per_worker": "2"})
    with pytest.raises(errors.InvalidConfigError, match="'rollout_fragment_length' must be >= 1"):
        RolloutWorker("CartPole-v1", PGPolicy, {"rollout_fragment_length": -5})


def test_actions_outside_the_space_are_an_error_naming_the_env():
    worker = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 50,
                                                  "clip_actions": False,
                                                  "normalize_actions": False})
    with pytest.raises(errors.ActionOutOfSpaceError, match="TinyBoxEnv"):
        worker.sample()


def test_nan_observation_is_an_error_naming_the_env():
    worker = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 10,
                                                  "clip_actions": True,
                                                  "env_config": {"nan_at": 3}})
    with pytest.raises(errors.InvalidObservationError, match="TinyBoxEnv.*non-finite"):
        worker.sample()


def test_env_exception_becomes_env_crash_error():
    worker = RolloutWorker(TinyBoxEnv, PGPolicy, {"rollout_fragment_length": 10,
                                                  "clip_actions": True,
                                                  "env_config": {"crash_at": 2}})
    with pytest.raises(errors.EnvCrashError, match="fell over"):
        worker.sample()


def test_bad_input_is_refused_at_construction():
    with pytest.raises(errors.UnknownEnvError, match="NoSuchEnv-v3"):
        RolloutWorker("NoSuchEnv-v3", PGPolicy, {})
    with pytest.raises(errors.UnsupportedSpaceError, match="Pendulum-v1.*Discrete action space"):
        RolloutWorker("Pendulum-v1", DiscretePGPolicy, {})
    with pytest.raises(errors.InvalidConfigError, match="batch_mode"):
        RolloutWorker("CartPole-v1", PGPolicy, {"batch_mode": "whole"})
    with pytest.raises(errors.InvalidConfigError, match="observation_filter"):
        RolloutWorker("CartPole-v1", PGPolicy, {"observation_filter": "Median"})
    with pytest.raises(errors.UnsupportedSpaceError, match="declares the action space"):
        RolloutWorker("CartPole-v1", {"p": (PGPolicy, None, gym.spaces.Discrete(3), {})}, {})


class CountingCallbacks(DefaultCallbacks):
    def on_episode_start(self, *, episode, **kwargs):
        episode.user_data["pole_angles"] = []

    def on_episode_step(self, *, episode, base_env, env_index, **kwargs):
        episode.user_data["pole_angles"].append(1.0)

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["steps_seen"] = len(episode.user_data["pole_angles"]) + 1
        episode.hist_data["lengths"] = [episode.length]

    def on_postprocess_trajectory(self, *, postprocessed_batch, **kwargs):
        postprocessed_batch["advantages"] = postprocessed_batch["advantages"] * 0 + 3.0

    def on_sample_end(self, *, worker, samples, **kwargs):
        worker.samples_seen = getattr(worker, "samples_seen", 0) + samples.count


def test_callbacks_see_episodes_fragments_and_custom_metrics_are_reported():
    worker = RolloutWorker("ShortCartPole", PGPolicy,
                           {"rollout_fragment_length": 20, "callbacks": CountingCallbacks,
                            "env_config": {"horizon": 5}})
    batch = worker.sample()
    assert np.all(batch["advantages"] == 3.0)
    assert worker.samples_seen == 20
    metrics = worker.get_metrics()
    assert metrics
    for m in metrics:
        assert m.custom_metrics["steps_seen"] == m.episode_length
        assert m.hist_data["lengths"] == [m.episode_length]
    from tfrl.rollout import summarize_episodes

    summary = summarize_episodes(metrics)
    assert summary["custom_metrics"]["steps_seen_mean"] == pytest.approx(
        np.mean([m.episode_length for m in metrics]))
    assert summary["episodes_this_iter"] == len(metrics)


def test_learning_entry_points_weights_and_save_restore():
    worker = RolloutWorker("CartPole-v1", PGPolicy, {"rollout_fragment_length": 50,
                                                     "observation_filter": "MeanStdFilter"})
    other = RolloutWorker("CartPole-v1", PGPolicy, {"rollout_fragment_length": 50})
    batch = worker.sample()
    before = worker.get_weights()["default_policy"]
    grads, info = worker.compute_gradients(batch)
    assert len(grads) == len(before) and "total_loss" in info
    worker.apply_gradients(grads)
    after = worker.get_weights()["default_policy"]
    assert any(not np.allclose(a, b) for a, b in zip(before, after))
    stats = worker.learn_on_batch(batch)
    assert "default_policy" in stats
    other.set_weights(worker.get_weights(), {"timestep": 1234})
    for a, b in zip(other.get_weights()["default_policy"], worker.get_weights()["default_policy"]):
        np.testing.assert_array_equal(a, b)
    assert other.global_vars["timestep"] == 1234

    saved = worker.save()
    restored = RolloutWorker("CartPole-v1", PGPolicy, {"rollout_fragment_length": 50,
                                                       "observation_filter": "MeanStdFilter"})
    restored.restore(saved)
    for a, b in zip(restored.get_weights()["default_policy"], worker.get_weights()["default_policy"]):
        np.testing.assert_array_equal(a, b)
    f1 = worker.get_filters()["default_policy"].running_stat
    f2 = restored.get_filters()["default_policy"].running_stat
    assert f1.count == f2.count and np.allclose(f1.mean, f2.mean)
    assert worker.foreach_policy(lambda p, pid: pid) == ["default_policy"]
    assert worker.foreach_env(lambda env: env.spec.id) == ["CartPole-v1"]
    worker.stop()


def test_postprocess_fragment_sees_all_of_a_policys_rows_of_a_fragment_once():
    # four envs whose episodes end inside the fragment: many trajectory pieces, one fragment
    worker = RolloutWorker("CartPole-v1", FragmentPGPolicy,
                           {"num_envs_per_worker": 4, "rollout_fragment_length": 40, "seed": 1})
    batch = worker.sample()
    assert batch.count == 160 and len(set(batch["eps_id"])) > 4
    np.testing.assert_array_equal(batch["fragment_rows"], np.full(160, 160))
    assert "advantages" in batch  # after each piece's postprocess_fn

    from test_multi_agent import TwoAgentCounter

    policies = {"pa": (FragmentPGPolicy, None, None, {}), "pb": (FragmentPGPolicy, None, None, {})}
    worker = RolloutWorker(TwoAgentCounter, policies, {"rollout_fragment_length": 8,
                                                       "num_envs_per_worker": 2},
                           policy_mapping_fn=lambda agent: "p" + agent)
    batches = worker.sample().policy_batches
    for pid, rows in (("pa", 16), ("pb", 8)):
        np.testing.assert_array_equal(batches[pid]["fragment_rows"], np.full(rows, rows))
