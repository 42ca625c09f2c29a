"""Multi-agent external envs and policy servers on remote workers, end to end: a scripted
ExternalMultiAgentEnv trained by a two-policy PG trainer, bad multi-agent calls over loopback
gRPC, and a trainer whose two Ray rollout workers each host a PolicyServer."""
import threading

import grpc
import gymnasium as gym
import numpy as np
import pytest

from tfrl import errors
from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.env import EnvContext, ExternalMultiAgentEnv
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout import RolloutWorker
from tfrl.rollout.callbacks import DefaultCallbacks
from tfrl.serving import (MultiAgentPolicyClient, MultiAgentPolicyServer, PolicyClient,
                          PolicyServer, PolicyServerPerWorker, policy_server_addresses)
from tfrl.serving.proto import policy_service_pb2 as pb
from tfrl.serving.values import encode_value

CARTPOLE = gym.make("CartPole-v1")
# two agents with spaces of their own: "a" sees CartPole's 4 numbers, "b" 2 numbers, 3 actions
OBS_SPACES = {"a": CARTPOLE.observation_space,
              "b": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
ACT_SPACES = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)}
MAPPING = {"a": "policy_a", "b": "policy_b"}


def policy_of(agent_id):
    return MAPPING[agent_id]


def observations(t, agents=("a", "b"), spaces=OBS_SPACES):
    full = {"a": np.array([0.01 * t, 0.0, 0.02, -0.01 * t], np.float32),
            "b": np.array([0.1 * t, -0.1, 0.0, 0.0], np.float32)[:spaces["b"].shape[0]]}
    return {agent: full[agent] for agent in agents}


class FourStepEpisodes(ExternalMultiAgentEnv):
    """Episodes of 4 steps until closed: "a" acts at every step, "b" at steps 0 and 2; step 2's
    actions are the application's own (log_action: "b" takes its last action). Each agent earns
    `reward_of(action)`: 1 for action 1, else 0, unless told otherwise."""

    def __init__(self, _ctx=None, obs_spaces=OBS_SPACES, act_spaces=ACT_SPACES,
                 reward_of=lambda action: float(action == 1)):
        super().__init__(act_spaces, obs_spaces)
        self.reward_of = reward_of

    def run(self):
        spaces = self.observation_spaces
        while not self.closed:
            episode = self.start_episode()
            for t in range(4):
                agents = ("a", "b") if t % 2 == 0 else ("a",)
                if t == 2:
                    actions = {"a": 1, "b": int(self.action_spaces["b"].n) - 1}
                    self.log_action(episode, observations(t, agents, spaces), actions)
                else:
                    actions = self.get_action(episode, observations(t, agents, spaces))
                assert set(actions) == set(agents)
                self.log_returns(episode, {a: self.reward_of(actions[a]) for a in agents})
            self.end_episode(episode, observations(4, spaces=spaces))


class RowsPerPolicy(DefaultCallbacks):
    """Counts the rows each sample() produced, per policy (the local worker runs here)."""

    rows = []

    def on_sample_end(self, *, worker, samples, **kwargs):
        RowsPerPolicy.rows.append({pid: b.count for pid, b in samples.policy_batches.items()})


def two_policy_config(policy_class=None, obs_spaces=OBS_SPACES, act_spaces=ACT_SPACES, **extra):
    return dict({
        "num_workers": 0, "batch_mode": "complete_episodes", "rollout_fragment_length": 8,
        "train_batch_size": 16, "lr": 0.05, "model": {"fcnet_hiddens": [8]},
        "multiagent": {"policies": {pid: (policy_class, obs_spaces[a], act_spaces[a], {})
                                    for a, pid in MAPPING.items()},
                       "policy_mapping_fn": policy_of}}, **extra)


def test_a_two_policy_trainer_learns_from_a_scripted_multi_agent_external_env(ray_session):
    from tfrl.agents.pg.pg import PGTrainer

    RowsPerPolicy.rows = []
    trainer = PGTrainer(
        # each policy with spaces of its own; every step earns something, so every policy's
        # gradient is nonzero whichever actions it samples
        env=lambda ctx: FourStepEpisodes(ctx, reward_of=lambda action: 1.0 + (action == 1)),
        config=two_policy_config(callbacks=RowsPerPolicy))
    try:
        before = {pid: [w.copy() for w in trainer.get_policy(pid).get_weights()]
                  for pid in MAPPING.values()}
        result = trainer.train()
        after = {pid: trainer.get_policy(pid).get_weights() for pid in MAPPING.values()}
    finally:
        trainer.stop()
    # 8 env steps a fragment = two whole episodes: 4 rows of "a" and 2 of "b" each
    assert RowsPerPolicy.rows == [{"policy_a": 8, "policy_b": 4}] * 2
    assert result["timesteps_total"] == 16
    assert result["episodes_total"] == 4
    for pid in MAPPING.values():
        assert any(not np.allclose(b, a) for b, a in zip(before[pid], after[pid])), pid


def test_rows_follow_the_multi_agent_calls_and_bad_calls_raise_before_queueing():
    worker = RolloutWorker(FourStepEpisodes, {}, two_policy_config(PGTFPolicy, rollout_fragment_length=4))
    try:
        batch = worker.sample()
        a, b = batch.policy_batches["policy_a"], batch.policy_batches["policy_b"]
        np.testing.assert_allclose(a[SampleBatch.OBS], np.stack([observations(t)["a"] for t in range(4)]))
        np.testing.assert_allclose(a[SampleBatch.NEXT_OBS],
                                   np.stack([observations(t)["a"] for t in range(1, 5)]))
        # "b" is seen at steps 0 and 2: its rows run 0 -> 2 and 2 -> the end
        np.testing.assert_allclose(b[SampleBatch.OBS], np.stack([observations(0)["b"], observations(2)["b"]]))
        np.testing.assert_allclose(b[SampleBatch.NEXT_OBS],
                                   np.stack([observations(2)["b"], observations(4)["b"]]))
        assert a[SampleBatch.ACTIONS][2] == 1 and b[SampleBatch.ACTIONS][1] == 2  # logged
        np.testing.assert_allclose(a[SampleBatch.REWARDS], (a[SampleBatch.ACTIONS] == 1).astype(np.float32))
        assert b[SampleBatch.REWARDS][1] == 0.0  # its logged action 2 earned nothing
        assert a[SampleBatch.TERMINATEDS].tolist() == [False, False, False, True]
        assert b[SampleBatch.TERMINATEDS].tolist() == [False, True]
    finally:
        worker.stop()

    env = FourStepEpisodes()
    episode = env.start_episode()
    with pytest.raises(errors.ExternalEnvError, match="unknown agent id 'c'"):
        env.log_action(episode, {"c": np.zeros(4, np.float32)}, {"c": 0})
    with pytest.raises(errors.InvalidObservationError, match="of agent 'b' is not in its observation space"):
        env.log_action(episode, {"b": np.zeros(4, np.float32)}, {"b": 0})  # "a"'s shape
    with pytest.raises(errors.ActionOutOfSpaceError, match="of agent 'a' is not in its action space"):
        env.log_action(episode, observations(0, ("a",)), {"a": 2})  # only "b" has 3 actions
    with pytest.raises(errors.ExternalEnvError, match="an action for each agent"):
        env.log_action(episode, observations(0), {"a": 1})
    with pytest.raises(errors.ExternalEnvError, match="non-empty dict"):
        env.get_action(episode, {})
    with pytest.raises(errors.ExternalEnvError, match="finite"):
        env.log_returns(episode, {"a": float("inf")})
    with pytest.raises(errors.ExternalEnvError, match="unknown episode id"):
        env.end_episode("nobody", observations(0))
    assert [env.events.get_nowait()[0] for _ in range(env.events.qsize())] == ["start"]


def test_the_observation_fn_rewrites_what_the_policies_see_of_an_external_env():
    seen = []

    def doubled(agent_obs, **kwargs):
        seen.append(set(kwargs))
        return {agent: 2.0 * obs for agent, obs in agent_obs.items()}

    config = two_policy_config(PGTFPolicy, rollout_fragment_length=4)
    config["multiagent"]["observation_fn"] = doubled
    worker = RolloutWorker(FourStepEpisodes, {}, config)
    try:
        batch = worker.sample()
    finally:
        worker.stop()
    a, b = batch.policy_batches["policy_a"], batch.policy_batches["policy_b"]
    np.testing.assert_allclose(a[SampleBatch.OBS], np.stack([2 * observations(t)["a"] for t in range(4)]))
    np.testing.assert_allclose(a[SampleBatch.NEXT_OBS][-1], 2 * observations(4)["a"])  # the end's too
    np.testing.assert_allclose(b[SampleBatch.OBS], np.stack([2 * observations(t)["b"] for t in (0, 2)]))
    assert seen and all(s == {"worker", "base_env", "policies", "episode"} for s in seen)


def test_bad_multi_agent_calls_get_invalid_argument_and_the_server_keeps_serving():
    worker = RolloutWorker(lambda ctx: MultiAgentPolicyServer(OBS_SPACES, ACT_SPACES), {},
                           two_policy_config(PGTFPolicy, rollout_fragment_length=2))
    sampled = []
    sampler = threading.Thread(target=lambda: sampled.append(worker.sample()), daemon=True)
    sampler.start()
    address = worker.env.address
    with pytest.raises(errors.NotSupportedError, match="local inference is single-agent only"):
        MultiAgentPolicyClient(address, "local")
    client = MultiAgentPolicyClient(address, timeout=20)
    channel = grpc.insecure_channel(address)
    single_agent = PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space)
    try:
        episode = client.start_episode()

        def refused(call, *args, code="INVALID_ARGUMENT"):
            with pytest.raises(errors.PolicyServerError) as info:
                call(*args)
            assert info.value.code == code, info.value
            return str(info.value)

        assert "unknown agent id 'c'" in refused(client.get_action, episode,
                                                 {"c": np.zeros(4, np.float32)})
        assert "of agent 'b' is not in its observation space" in refused(
            client.get_action, episode, {"b": np.array([5.0, 0.0], np.float32)})
        assert "leaves" in refused(client.get_action, episode, {"a": (np.zeros(4, np.float32),) * 2})
        assert "unknown episode id" in refused(client.get_action, "nobody", observations(0))
        assert "an action for each agent" in refused(client.log_action, episode, observations(0),
                                                     {"a": 1})
        assert "of agent 'b' is not in its action space" in refused(client.log_action, episode, observations(0),
                                                {"a": 1, "b": 7})
        assert "serves no weights" in refused(client.update_policy_weights,
                                              code="FAILED_PRECONDITION")
        # single-agent fields to a multi-agent server, multi-agent fields to a single-agent one
        one = pb.GetActionRequest(episode_id=episode, observation=encode_value(np.zeros(4, np.float32)))
        many = pb.GetActionRequest(episode_id="x", agent_observations={"a": encode_value(np.zeros(4, np.float32))})
        for target, message, expected in ((address, one, "send agent_observations"),
                                          (single_agent.address, many, "send observation, not")):
            with grpc.insecure_channel(target) as raw_channel:
                with pytest.raises(grpc.RpcError) as info:
                    raw_channel.unary_unary("/tfrl.serving.PolicyService/GetAction")(
                        message.SerializeToString(), timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert expected in info.value.details()

        # after all that, the episode plays on: two good steps become the fragment's rows
        first = client.get_action(episode, observations(0))
        assert set(first) == {"a", "b"} and first["b"] in (0, 1, 2)
        client.log_returns(episode, {"a": 1.0, "b": 0.5})
        client.log_returns(episode, {"a": 1.0})
        client.log_action(episode, observations(1, ("a",)), {"a": 0})
        client.end_episode(episode, observations(2), truncated=True)
        sampler.join(20)
        batch = sampled[0]
        a, b = batch.policy_batches["policy_a"], batch.policy_batches["policy_b"]
        assert a[SampleBatch.ACTIONS].tolist() == [first["a"], 0]
        np.testing.assert_allclose(a[SampleBatch.REWARDS], [2.0, 0.0])
        assert a[SampleBatch.TRUNCATEDS].tolist() == [False, True]
        assert b[SampleBatch.ACTIONS].tolist() == [first["b"]]
        np.testing.assert_allclose(b[SampleBatch.NEXT_OBS], [observations(2)["b"]])
        np.testing.assert_allclose(b[SampleBatch.REWARDS], [0.5])
    finally:
        channel.close()
        client.close()
        single_agent.close()
        worker.stop()


def play_cartpole(client, stop, failures):
    env = gym.make("CartPole-v1")
    try:
        while not stop.is_set():
            episode = client.start_episode()
            obs, _ = env.reset()
            while True:
                obs, reward, terminated, truncated, _ = env.step(client.get_action(episode, obs))
                client.log_returns(episode, reward)
                if terminated or truncated:
                    client.end_episode(episode, obs, truncated=truncated and not terminated)
                    break
    except errors.PolicyServerError as exc:
        if not stop.is_set():
            failures.append(exc)
    except Exception as exc:  # collected and asserted on by the test
        failures.append(exc)


def test_each_remote_worker_hosts_a_server_and_the_trainer_trains_from_all(ray_session):
    from tfrl.agents.pg.pg import PGTrainer

    # the ports: worker i on base + i; the driver's worker hosts none when workers serve
    creator = PolicyServerPerWorker(CARTPOLE.observation_space, CARTPOLE.action_space, port=0)
    probe = PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space)
    base = probe.port - 2
    probe.close()
    fixed = PolicyServerPerWorker(CARTPOLE.observation_space, CARTPOLE.action_space, port=base)
    server = fixed(EnvContext(worker_index=2, num_workers=2))
    try:
        assert server.port == base + 2 and server.host == "127.0.0.1"
    finally:
        server.close()
    assert not isinstance(fixed(EnvContext(worker_index=0, num_workers=2)), PolicyServer)

    trainer = PGTrainer(env=creator, config={
        "num_workers": 2, "rollout_fragment_length": 50, "train_batch_size": 100,
        "model": {"fcnet_hiddens": [8]}, "jit_compile_actions": False})
    stop, failures, threads, clients = threading.Event(), [], [], []
    try:
        addresses = policy_server_addresses(trainer)
        assert len(set(addresses)) == 2 and all(a.startswith("localhost:") for a in addresses)
        for address in addresses:
            client = PolicyClient(address, timeout=60)
            clients.append(client)
            thread = threading.Thread(target=play_cartpole, args=(client, stop, failures),
                                      daemon=True)
            thread.start()
            threads.append(thread)
        before = [w.copy() for w in trainer.get_policy().get_weights()]
        results = [trainer.train() for _ in range(2)]
        per_worker = trainer.workers.foreach_worker(lambda w: w.num_steps_sampled,
                                                    local_worker=False)
        after = trainer.get_policy().get_weights()
    finally:
        stop.set()
        trainer.stop()
        for thread in threads:
            thread.join(10)
        for client in clients:
            client.close()
    assert not failures, failures
    assert results[-1]["timesteps_total"] == 200
    # both servers' clients fed every round (100 steps each: an episode ends on each, even at
    # random play)
    assert per_worker == [100, 100]
    assert results[-1]["episodes_total"] > 0
    assert any(not np.allclose(b, a) for b, a in zip(before, after))
