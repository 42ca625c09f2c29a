"""ExternalEnv through a RolloutWorker: the rows follow the application's calls exactly."""
import threading

import gymnasium as gym
import numpy as np
import pytest

from tfrl import errors
from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.env import ExternalEnv
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout import RolloutWorker

CARTPOLE = gym.make("CartPole-v1")
OBS = [np.array([0.01 * i, -0.02 * i, 0.03, 0.0], np.float32) for i in range(6)]


class ScriptedEnv(ExternalEnv):
    """Two episodes: one of logged actions ended by a time limit, one asking for actions."""

    def __init__(self, _ctx=None):
        super().__init__(CARTPOLE.action_space, CARTPOLE.observation_space)
        self.asked = []
        self.done = threading.Event()

    def run(self):
        first = self.start_episode()
        self.log_action(first, OBS[0], 1)
        self.log_returns(first, 1.0)
        self.log_returns(first, 0.5)  # rewards between two actions add up
        self.log_action(first, OBS[1], 0)
        self.log_returns(first, 2.0)
        self.end_episode(first, OBS[2], truncated=True)
        second = self.start_episode()
        for i in (3, 4):
            self.asked.append(self.get_action(second, OBS[i]))
            self.log_returns(second, 1.0)
        self.end_episode(second, OBS[5])
        self.done.set()


def make_worker(env_creator=ScriptedEnv, **config):
    base = {"batch_mode": "complete_episodes", "rollout_fragment_length": 4,
            "model": {"fcnet_hiddens": [8]}}
    return RolloutWorker(env_creator, PGTFPolicy, dict(base, **config))


def test_rows_follow_the_application_calls():
    worker = make_worker()
    try:
        batch = worker.sample()
        env = worker.env
        assert env.done.wait(10)
        assert batch.count == 4
        np.testing.assert_allclose(batch[SampleBatch.OBS], np.stack(OBS[0:2] + OBS[3:5]), rtol=1e-6)
        np.testing.assert_allclose(batch[SampleBatch.NEXT_OBS], np.stack(OBS[1:3] + OBS[4:6]),
                                   rtol=1e-6)
        assert batch[SampleBatch.ACTIONS].tolist() == [1, 0] + [int(a) for a in env.asked]
        np.testing.assert_allclose(batch[SampleBatch.REWARDS], [1.5, 2.0, 1.0, 1.0])
        assert batch[SampleBatch.TERMINATEDS].tolist() == [False, False, False, True]
        assert batch[SampleBatch.TRUNCATEDS].tolist() == [False, True, False, False]
        eps = batch[SampleBatch.EPS_ID]
        assert eps[0] == eps[1] and eps[2] == eps[3] and eps[0] != eps[2]
        # a logged action's likelihood is the policy's for that action, not for the one it sampled
        policy = worker.get_policy()
        expected = policy.compute_log_likelihoods(np.array([1, 0]), np.stack(OBS[0:2]))
        np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP][:2], expected, rtol=1e-5)
        metrics = worker.get_metrics()
        assert [(m.episode_length, m.episode_reward) for m in metrics] == [(2, 3.5), (2, 2.0)]
    finally:
        worker.stop()


def test_truncate_episodes_returns_exactly_one_fragment_and_keeps_the_rest():
    class ManySteps(ExternalEnv):
        def __init__(self, _ctx=None):
            super().__init__(CARTPOLE.action_space, CARTPOLE.observation_space)

        def run(self):
            episode = self.start_episode()
            for i in range(11):
                self.log_action(episode, OBS[i % 6], i % 2)
                self.log_returns(episode, float(i))
            self.end_episode(episode, OBS[0])

    worker = make_worker(ManySteps, batch_mode="truncate_episodes", rollout_fragment_length=4)
    try:
        batches = [worker.sample() for _ in range(2)]
        assert [b.count for b in batches] == [4, 4]
        rewards = np.concatenate([b[SampleBatch.REWARDS] for b in batches])
        np.testing.assert_allclose(rewards, np.arange(8.0))
        assert batches[1][SampleBatch.T].tolist() == [4, 5, 6, 7]  # the episode goes on
    finally:
        worker.stop()


def test_bad_calls_raise_before_anything_is_recorded():
    env = ScriptedEnv()
    episode = env.start_episode()
    with pytest.raises(errors.InvalidObservationError, match="not in the observation space"):
        env.log_action(episode, np.array([100.0, 0, 0, 0], np.float32), 0)
    with pytest.raises(errors.InvalidObservationError):
        env.log_action(episode, np.zeros(3, np.float32), 0)
    with pytest.raises(errors.ActionOutOfSpaceError, match="action space"):
        env.log_action(episode, OBS[0], 7)
    with pytest.raises(errors.ExternalEnvError, match="unknown episode id"):
        env.log_returns("no-such-episode", 1.0)
    with pytest.raises(errors.ExternalEnvError, match="finite"):
        env.log_returns(episode, float("nan"))
    with pytest.raises(errors.ExternalEnvError, match="already running"):
        env.start_episode(episode)
    env.end_episode(episode, OBS[1])
    with pytest.raises(errors.ExternalEnvError, match="unknown episode id"):
        env.end_episode(episode, OBS[1])
    kinds = [env.events.get_nowait()[0] for _ in range(env.events.qsize())]
    assert kinds == ["start", "end"]  # only the good calls became events


def test_a_crashing_run_surfaces_as_env_crash_error():
    class Crashing(ExternalEnv):
        def __init__(self, _ctx=None):
            super().__init__(CARTPOLE.action_space, CARTPOLE.observation_space)

        def run(self):
            raise RuntimeError("the application fell over")

    worker = make_worker(Crashing)
    try:
        with pytest.raises(errors.EnvCrashError, match="the application fell over"):
            worker.sample()
    finally:
        worker.stop()


def test_a_waiting_get_action_fails_on_close_and_times_out_without_a_sampler():
    env = ScriptedEnv()
    episode = env.start_episode()
    failures = []
    waiter = threading.Thread(target=lambda: failures.append(
        pytest.raises(errors.ExternalEnvError, env.get_action, episode, OBS[0])), daemon=True)
    waiter.start()
    while not env._replies:  # the call is waiting for its action
        waiter.join(0.01)
    env.close()
    waiter.join(10)
    assert not waiter.is_alive() and "was closed" in str(failures[0].value)

    patient = ScriptedEnv()
    patient.action_timeout_s = 0.2
    with pytest.raises(errors.ActionTimeoutError, match="no action within 0.2 s"):
        patient.get_action(patient.start_episode(), OBS[0])


STEP_OBS = [np.array([0.01 * i, -0.01 * i, 0.02, 0.001 * i], np.float32) for i in range(12)]
STEP_ACTIONS = [i % 2 for i in range(11)]
STEP_REWARDS = [float(i) for i in range(11)]  # earned after step i
FIRST_REWARD = 0.5  # earned before the first step: it counts for that step


class OneStepAtATime(ExternalEnv):
    """Eleven logged steps of one episode, a log_action call each."""

    def __init__(self, _ctx=None):
        super().__init__(CARTPOLE.action_space, CARTPOLE.observation_space)

    def run(self):
        episode = self.start_episode()
        self.log_returns(episode, FIRST_REWARD)
        for i in range(11):
            self.log_action(episode, STEP_OBS[i], STEP_ACTIONS[i])
            self.log_returns(episode, STEP_REWARDS[i])
        self.end_episode(episode, STEP_OBS[11], truncated=True)


class StepsInColumns(ExternalEnv):
    """The same eleven steps as three log_actions calls of stacked rows (4 + 5 + 2), the
    rewards of each step sent before the next one, as a client sends them."""

    def __init__(self, _ctx=None):
        super().__init__(CARTPOLE.action_space, CARTPOLE.observation_space)

    def run(self):
        episode = self.start_episode()
        before = [FIRST_REWARD] + STEP_REWARDS[:-1]
        for start, stop in ((0, 4), (4, 9), (9, 11)):
            self.log_actions(episode, np.stack(STEP_OBS[start:stop]),
                             np.array(STEP_ACTIONS[start:stop]), before[start:stop])
        self.end_episode(episode, STEP_OBS[11], truncated=True, reward=STEP_REWARDS[-1])


@pytest.mark.parametrize("batch_mode,fragment", [("complete_episodes", 11),
                                                 ("truncate_episodes", 3)])
def test_log_actions_gives_the_rows_of_as_many_log_action_calls(batch_mode, fragment):
    columns = (SampleBatch.OBS, SampleBatch.NEXT_OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS,
               SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS, SampleBatch.T,
               SampleBatch.ACTION_LOGP)
    sampled = {}
    for env_class in (OneStepAtATime, StepsInColumns):
        worker = make_worker(env_class, batch_mode=batch_mode, rollout_fragment_length=fragment,
                             seed=7)  # the same initial weights, so the same likelihoods
        try:
            batches = [worker.sample() for _ in range(11 // fragment)]
            sampled[env_class] = batches
            metrics = worker.get_metrics()
        finally:
            worker.stop()
        # every fragment holds exactly its rows, in a block's middle as well
        assert [b.count for b in batches] == [fragment] * (11 // fragment)
        if batch_mode == "complete_episodes":
            assert [(m.episode_length, m.episode_reward) for m in metrics] == [
                (11, 55.0 + FIRST_REWARD)]
    for one, columnar in zip(sampled[OneStepAtATime], sampled[StepsInColumns]):
        for column in columns:
            np.testing.assert_allclose(columnar[column], one[column], rtol=1e-6, err_msg=column)
    rows = sampled[StepsInColumns]
    np.testing.assert_allclose(np.concatenate([b[SampleBatch.REWARDS] for b in rows]),
                               (np.array(STEP_REWARDS) + np.eye(11)[0] * FIRST_REWARD)[
                                   :len(rows) * fragment])


def test_log_actions_is_checked_whole_before_anything_is_recorded():
    env = ScriptedEnv()
    episode = env.start_episode()
    good = np.stack(STEP_OBS[:3])
    bad = good.copy()
    bad[2, 0] = 100.0
    with pytest.raises(errors.InvalidObservationError, match="step 2 of 3"):
        env.log_actions(episode, bad, np.array([0, 1, 0]))
    with pytest.raises(errors.ActionOutOfSpaceError, match="step 1 of 3"):
        env.log_actions(episode, good, np.array([0, 2, 0]))
    with pytest.raises(errors.InvalidObservationError, match=r"shape \(3, 3\)"):
        env.log_actions(episode, good[:, :3], np.array([0, 1, 0]))
    with pytest.raises(errors.ExternalEnvError, match="3 observations but 2 actions"):
        env.log_actions(episode, good, np.array([0, 1]))
    with pytest.raises(errors.ExternalEnvError, match="3 steps but 1 rewards"):
        env.log_actions(episode, good, np.array([0, 1, 0]), [1.0])
    with pytest.raises(errors.ExternalEnvError, match="finite"):
        env.log_actions(episode, good, np.array([0, 1, 0]), [0.0, float("inf"), 0.0])
    with pytest.raises(errors.ExternalEnvError, match="unknown episode id"):
        env.log_actions("nobody", good, np.array([0, 1, 0]))
    env.log_actions(episode, good, np.array([0, 1, 0]))
    events = [env.events.get_nowait() for _ in range(env.events.qsize())]
    assert [e[0] for e in events] == ["start", "steps"]  # only the good call became an event
    np.testing.assert_array_equal(events[1][2], good)
