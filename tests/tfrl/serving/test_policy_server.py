"""The serving bridge end to end: a PolicyServer inside a real trainer or worker, real
PolicyClients over loopback gRPC (remote and local inference, token and TLS), bad calls."""
import threading
import time

import grpc
import gymnasium as gym
import numpy as np
import pytest

from tests.replay.tls import self_signed_certificate
from tfrl import errors
from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout import RolloutWorker
from tfrl.serving import PolicyClient, PolicyServer
from tfrl.serving.proto import policy_service_pb2 as pb
from tfrl.serving.values import encode_value

CARTPOLE = gym.make("CartPole-v1")
PPO_CONFIG = {"num_workers": 0, "train_batch_size": 500, "rollout_fragment_length": 100,
              "sgd_minibatch_size": 100, "num_sgd_iter": 10, "lr": 2e-3}


def play(client, returns, stop, seed=0):
    """A plain loop that owns CartPole and asks `client` for every action."""
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    try:
        while not stop.is_set():
            episode = client.start_episode()
            obs, _ = env.reset()
            total = 0.0
            while True:
                action = client.get_action(episode, obs)
                obs, reward, terminated, truncated, _ = env.step(action)
                client.log_returns(episode, reward)
                total += reward
                if terminated or truncated:
                    client.end_episode(episode, obs, truncated=truncated and not terminated)
                    break
            returns.append(total)
    except errors.PolicyServerError as exc:
        if exc.code != "UNAVAILABLE" and not stop.is_set():
            raise


def greedy_returns(policy, episodes: int) -> list:
    """The returns of `policy` acting greedily in CartPole, seeds 0 .. episodes - 1."""
    env, returns = gym.make("CartPole-v1"), []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            actions, _, _ = policy.compute_actions(obs[None], explore=False)
            obs, reward, terminated, truncated, _ = env.step(int(actions[0]))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return returns


def start_loop(client, returns, stop):
    failures = []

    def body():
        try:
            play(client, returns, stop)
        except Exception as exc:  # collected and asserted on by the test
            failures.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, failures


def ppo_with_server(**server_kwargs):
    from tfrl.agents.ppo.ppo import PPOTrainer

    return PPOTrainer(env=lambda ctx: PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space,
                                                   **server_kwargs),
                      config=dict(PPO_CONFIG))


def serving_worker(batch_mode: str, fragment: int, **server_kwargs):
    """A RolloutWorker (a tiny PG policy) whose env is a PolicyServer on CartPole's spaces."""
    return RolloutWorker(
        lambda ctx: PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space,
                                 **server_kwargs),
        PGTFPolicy, {"batch_mode": batch_mode, "rollout_fragment_length": fragment,
                     "model": {"fcnet_hiddens": [8]}})


def sample_in_thread(worker):
    """One worker.sample() in a thread: (the thread, the list its batch lands in)."""
    sampled = []
    sampler = threading.Thread(target=lambda: sampled.append(worker.sample()), daemon=True)
    sampler.start()
    return sampler, sampled


def outcome_in_thread(call):
    """`call()` in a thread: (the thread, a list that gets "returned" or the PolicyServerError
    code it raised)."""
    outcome = []

    def run():
        try:
            call()
            outcome.append("returned")
        except errors.PolicyServerError as exc:
            outcome.append(exc.code)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_ppo_learns_from_an_application_loop_through_a_remote_client(ray_session):
    trainer = ppo_with_server()
    server = trainer.workers.local_worker().env
    client = PolicyClient(server.address)
    returns, stop = [], threading.Event()
    thread, failures = start_loop(client, returns, stop)
    try:
        results = [trainer.train() for _ in range(8)]
        trained = greedy_returns(trainer.get_policy(), episodes=5)
    finally:
        stop.set()
        trainer.stop()
        thread.join(10)
        client.close()
    assert not failures
    assert [r["timesteps_total"] for r in results] == [500 * (i + 1) for i in range(8)]
    # every episode the trainer reports is one the application played, with its return
    reported = [x for r in results for x in r["hist_stats"]["episode_reward"][-r["episodes_this_iter"]:]]
    assert reported == returns[:len(reported)]
    # the policy trained on them plays far better than the application's first episodes did
    # (judged in an env of the test's own: the application's last episodes may have been
    # played before the last update reached the server, on a loaded machine)
    first = results[0]["episode_reward_mean"]
    assert np.mean(trained) > 1.4 * first, (first, trained)


def test_local_inference_over_tls_with_a_token_trains_and_follows_the_weights(ray_session):
    certificate, key = self_signed_certificate()
    trainer = ppo_with_server(token="s3cret", tls_certificate=certificate, tls_private_key=key)
    server = trainer.workers.local_worker().env
    with pytest.raises(errors.PolicyServerError) as refused:
        PolicyClient(server.address, "local", root_certificates=certificate)
    assert refused.value.code == "UNAUTHENTICATED"
    client = PolicyClient(server.address, "local", token="s3cret", root_certificates=certificate,
                          update_interval=0.5, report_every=64)
    policy = trainer.get_policy()
    assert type(client.policy) is type(policy)
    returns, stop = [], threading.Event()
    thread, failures = start_loop(client, returns, stop)
    try:
        results = [trainer.train() for _ in range(3)]
        stop.set()  # the loop's own periodic pulls must not race the comparison below
        thread.join(10)
        assert not thread.is_alive()
        client.update_policy_weights()
        for mine, theirs in zip(client.policy.get_weights(), policy.get_weights()):
            np.testing.assert_array_equal(mine, theirs)
        # the client acted through its numpy copy, which follows the pulled weights
        obs = np.array([[0.02, -0.1, 0.03, 0.2]], np.float32)
        _, _, extra = policy.compute_actions(obs, explore=False)
        np.testing.assert_allclose(client.numpy_actor.distribution_inputs(obs[0]),
                                   extra["action_dist_inputs"][0], rtol=1e-4, atol=1e-5)
    finally:
        stop.set()
        trainer.stop()
        thread.join(10)
    assert not failures
    assert results[-1]["timesteps_total"] == 1500
    assert results[-1]["episodes_total"] > 0


def test_bad_calls_get_invalid_argument_and_the_server_keeps_serving():
    worker = serving_worker("complete_episodes", 3)
    server = worker.env
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(server.address, timeout=20)
    channel = grpc.insecure_channel(server.address)
    try:
        episode = client.start_episode()

        def refused(call, *args):
            with pytest.raises(errors.PolicyServerError) as info:
                call(*args)
            assert info.value.code == "INVALID_ARGUMENT", info.value
            return str(info.value)

        assert "not in the observation space" in refused(
            client.get_action, episode, np.array([100.0, 0, 0, 0], np.float32))
        assert "leaves" in refused(client.get_action, episode, (np.zeros(4, np.float32),) * 2)
        assert "unknown episode id" in refused(client.get_action, "nobody", np.zeros(4, np.float32))
        assert "action space" in refused(client.log_action, episode, np.zeros(4, np.float32), 5)
        raw = channel.unary_unary("/tfrl.serving.PolicyService/GetAction")
        short = pb.GetActionRequest(episode_id=episode, observation=pb.SpaceValue(
            leaves=[pb.Tensor(dtype="float32", shape=[4], data=b"\0" * 15)]))
        strange = pb.GetActionRequest(episode_id=episode, observation=pb.SpaceValue(
            leaves=[pb.Tensor(dtype="object", shape=[4], data=b"\0" * 32)]))
        for message, expected in ((short.SerializeToString(), "needs 16 bytes"),
                                  (strange.SerializeToString(), "dtype 'object'"),
                                  (b"\xff\xff\xff", "not a tfrl.serving.GetActionRequest")):
            with pytest.raises(grpc.RpcError) as info:
                raw(message, timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert expected in info.value.details()
        # a report stops at its first bad call; the ones before it are applied
        report = pb.ReportRequest(calls=[
            pb.Call(log_returns=pb.LogReturnsRequest(episode_id=episode, reward=0.0)),
            pb.Call(end_episode=pb.EndEpisodeRequest(episode_id="nobody",
                                                     observation=encode_value(np.zeros(4, np.float32))))])
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary("/tfrl.serving.PolicyService/Report")(report.SerializeToString(), timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "call 1 of 2" in info.value.details()

        # after all that, the episode plays on and only its good steps become rows
        observations = [np.array([0.01 * i, 0.0, 0.02, 0.0], np.float32) for i in range(4)]
        actions = []
        for i in range(3):
            actions.append(client.get_action(episode, observations[i]))
            client.log_returns(episode, 1.0)
        client.end_episode(episode, observations[3])
        sampler.join(20)
        batch = sampled[0]
        assert batch.count == 3
        np.testing.assert_allclose(batch[SampleBatch.OBS], np.stack(observations[:3]))
        assert batch[SampleBatch.ACTIONS].tolist() == [int(a) for a in actions]
        np.testing.assert_allclose(batch[SampleBatch.REWARDS], [1.0, 1.0, 1.0])
        assert batch[SampleBatch.TERMINATEDS].tolist() == [False, False, True]
    finally:
        channel.close()
        client.close()
        worker.stop()
    with pytest.raises(errors.PolicyServerError) as info:
        PolicyClient(server.address, timeout=5).start_episode()
    assert info.value.code == "UNAVAILABLE"


def test_a_local_clients_refused_report_surfaces_at_its_next_flush_and_the_client_goes_on():
    worker = serving_worker("complete_episodes", 2)
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(worker.env.address, "local", report_every=2, timeout=20)
    try:
        assert client.numpy_actor is not None
        # two steps fill a report, which goes out without waiting for its answer
        stray = np.zeros(4, np.float32)
        client.log_action("nobody", stray, 0)
        client.log_action("nobody", stray, 1)
        with pytest.raises(errors.PolicyServerError) as info:
            client.flush()
        assert info.value.code == "INVALID_ARGUMENT" and "unknown episode id" in str(info.value)
        assert "(log_actions)" in str(info.value)
        episode = client.start_episode()
        observations = [np.array([0.01 * i, 0.0, 0.02, 0.0], np.float32) for i in range(3)]
        actions = [client.get_action(episode, observations[i]) for i in range(2)]
        client.end_episode(episode, observations[2])
        sampler.join(20)
        assert sampled and sampled[0][SampleBatch.ACTIONS].tolist() == [int(a) for a in actions]
    finally:
        client.close()
        worker.stop()


def test_the_server_listens_on_loopback_by_default_and_refuses_half_a_tls_pair():
    server = PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space)
    try:
        assert server.host == "127.0.0.1" and server.address.startswith("localhost:")
    finally:
        server.close()
    certificate, _ = self_signed_certificate()
    with pytest.raises(errors.InvalidConfigError, match="both a certificate and a private key"):
        PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space, tls_certificate=certificate)


def load_serving_example():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[3] / "examples" / "serving_cartpole.py"
    spec = importlib.util.spec_from_file_location("serving_cartpole_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_call_still_running_when_the_server_closes_ends_with_unavailable_not_cancelled():
    """A handler still running when close() comes (late on a busy machine) answers: its client
    learns that the server stopped (UNAVAILABLE, the code the serving example's loop exits on)."""
    server = PolicyServer(CARTPOLE.observation_space, CARTPOLE.action_space)
    client = PolicyClient(server.address, timeout=20)
    entered = threading.Event()
    real_end_episode = server.end_episode

    def slow_end_episode(*args):  # the fault: a handler that runs late
        entered.set()
        threading.Event().wait(0.3)
        return real_end_episode(*args)

    server.end_episode = slow_end_episode
    try:
        episode = client.start_episode()
        thread, outcome = outcome_in_thread(
            lambda: client.end_episode(episode, np.zeros(4, np.float32)))
        assert entered.wait(10)
        server.close()
        thread.join(10)
        assert outcome == ["UNAVAILABLE"]
    finally:
        client.close()
        server.close()


def test_a_remote_client_whose_server_stopped_with_its_action_stream_open_learns_it_stopped():
    """The client's next call after the server stopped reports UNAVAILABLE (the code the serving
    example's loop ends on), whether the stopping server ended its open stream or cut it."""
    worker = serving_worker("truncate_episodes", 2)
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(worker.env.address, timeout=20)
    try:
        episode = client.start_episode()
        for i in range(4):  # the stream is open, and the worker's sample() is complete
            client.get_action(episode, np.array([0.01 * i, 0.0, 0.0, 0.0], np.float32))
        sampler.join(20)
        assert sampled
        worker.stop()
        with pytest.raises(errors.PolicyServerError) as info:
            client.get_action(episode, np.zeros(4, np.float32))
        assert info.value.code == "UNAVAILABLE"
    finally:
        client.close()
        worker.stop()


def test_closing_a_client_ends_a_call_another_thread_waits_on_and_the_server_serves_on():
    """The action stream runs on its own event loop, driven by the calling thread; close() from
    another thread cancels the waiting call (UNAVAILABLE), and a second client's two threads
    share their client (one on the stream, the other as plain GetAction calls)."""
    worker = serving_worker("truncate_episodes", 4, inline_inference=False,
                            action_timeout_s=30)
    server = worker.env
    client = PolicyClient(server.address, timeout=30)
    try:
        episode = client.start_episode()
        # no sample() runs: the call waits for the worker
        waiting, outcome = outcome_in_thread(
            lambda: client.get_action(episode, np.zeros(4, np.float32)))
        deadline = time.monotonic() + 10
        while server.events.qsize() < 2 and time.monotonic() < deadline:  # start, observation
            time.sleep(0.01)
        client.close()
        waiting.join(10)
        assert outcome == ["UNAVAILABLE"]

        other = PolicyClient(server.address, timeout=30)
        sampler, sampled = sample_in_thread(worker)
        episodes = [other.start_episode(), other.start_episode()]
        actions = {}

        def play(episode_id):
            actions[episode_id] = [other.get_action(episode_id, np.full(4, 0.01 * i, np.float32))
                                   for i in range(3)]

        players = [threading.Thread(target=play, args=(e,), daemon=True) for e in episodes]
        for player in players:
            player.start()
        for player in players:
            player.join(20)
        assert all(set(actions[e]) <= {0, 1} and len(actions[e]) == 3 for e in episodes)
        sampler.join(20)
        assert len(sampled[0][SampleBatch.OBS]) == 4
        other.close()
    finally:
        client.close()
        worker.stop()


def test_a_call_a_server_cancels_is_reported_as_unavailable_not_as_the_clients_own():
    """gRPC servers cancel the calls they cannot finish when they stop (after close()'s grace,
    or a server in another language); the client never cancels a call itself, so it reports one
    as the server having stopped."""
    import concurrent.futures

    def cancelled(request, context):  # the fault: a server that cuts the call off
        context.cancel()

    bare = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
    bare.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "tfrl.serving.PolicyService",
        {"StartEpisode": grpc.unary_unary_rpc_method_handler(cancelled)}),))
    port = bare.add_insecure_port("127.0.0.1:0")
    bare.start()
    client = PolicyClient(f"localhost:{port}", timeout=20)
    try:
        with pytest.raises(errors.PolicyServerError) as info:
            client.start_episode()
        assert info.value.code == "UNAVAILABLE"
        assert "stopped during the call" in str(info.value)
    finally:
        client.close()
        bare.stop(None)


def test_the_serving_example_trains_with_its_application_loop_and_a_token(ray_session):
    """examples/serving_cartpole.py's two sides, as the README runs them (the client in a thread
    here): the trainer's results come from the episodes the application played."""
    example = load_serving_example()
    returns, threads, failures = [], [], []

    def client_side(address):
        try:
            returns.extend(example.run_client(address, "t0ken", "remote"))
        except Exception as exc:  # asserted on below, with its message
            failures.append(exc)

    def start_client(address):
        thread = threading.Thread(target=client_side, args=(address,), daemon=True)
        thread.start()
        threads.append(thread)

    result = example.serve(0, "t0ken", stop_reward=float("inf"), max_iterations=1,
                           started=start_client)
    threads[0].join(30)
    assert not threads[0].is_alive()  # the client saw the server stop and returned
    assert not failures, failures
    assert result["timesteps_total"] == example.PPO_CONFIG["train_batch_size"]
    assert result["episodes_total"] > 0
    assert sorted(result["hist_stats"]["episode_reward"]) == sorted(returns[:result["episodes_total"]])


def test_the_action_stream_answers_each_request_in_order_and_a_bad_one_ends_only_that_stream():
    worker = serving_worker("complete_episodes", 4)
    server = worker.env
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(server.address, timeout=20)
    channel = grpc.insecure_channel(server.address)
    stream = channel.stream_stream("/tfrl.serving.PolicyService/GetActionStream",
                                   request_serializer=pb.GetActionRequest.SerializeToString,
                                   response_deserializer=pb.GetActionResponse.FromString)
    try:
        episode = client.start_episode()
        observations = [np.array([0.01 * i, 0.0, -0.02, 0.0], np.float32) for i in range(5)]
        # any gRPC client can use the stream: three requests, three answers, in order
        answers = list(stream(iter([pb.GetActionRequest(episode_id=episode,
                                                        observation=encode_value(obs), reward=1.0)
                                    for obs in observations[:3]]), timeout=60))
        actions = [int(np.frombuffer(a.action.leaves[0].data, np.int64)[0]) for a in answers]
        assert len(actions) == 3 and set(actions) <= {0, 1}
        # a bad request ends its stream with INVALID_ARGUMENT, after the good one before it
        bad = iter([pb.GetActionRequest(episode_id=episode, observation=encode_value(observations[3])),
                    pb.GetActionRequest(episode_id=episode, observation=encode_value(
                        np.array([100.0, 0, 0, 0], np.float32)))])
        replies = stream(bad, timeout=60)
        actions.append(int(np.frombuffer(next(replies).action.leaves[0].data, np.int64)[0]))
        with pytest.raises(grpc.RpcError) as info:
            next(replies)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not in the observation space" in info.value.details()
        # the server goes on serving: the client's own stream, then the episode's end
        actions.append(client.get_action(episode, observations[4]))
        client.end_episode(episode, np.zeros(4, np.float32))
        sampler.join(20)
        batch = sampled[0]
        np.testing.assert_allclose(batch[SampleBatch.OBS], np.stack(observations))
        assert batch[SampleBatch.ACTIONS].tolist() == [int(a) for a in actions]
        # each request's reward was earned before it: the first one's counts for the first step
        np.testing.assert_allclose(batch[SampleBatch.REWARDS], [2.0, 1.0, 0.0, 0.0, 0.0])
    finally:
        channel.close()
        client.close()
        worker.stop()


def test_remote_actions_are_answered_inline_by_the_workers_current_policy_up_to_a_backlog():
    # the timeout bounds the first answers too, which wait for the worker's first inference: at
    # 0.5 s a loaded machine missed it once
    worker = serving_worker("truncate_episodes", 2, action_timeout_s=3.0, inline_max_backlog=3)
    server = worker.env
    client = PolicyClient(server.address, timeout=20)
    policy = worker.get_policy()
    observations = [np.array([0.02 * i, 0.1, -0.01, 0.0], np.float32) for i in range(7)]
    try:
        episode = client.start_episode()
        sampler = threading.Thread(target=worker.sample, daemon=True)
        sampler.start()
        actions = [client.get_action(episode, obs) for obs in observations[:3]]
        sampler.join(20)  # two rows complete: the first sample() has returned
        assert not sampler.is_alive()
        # no sample() runs now: the server's numpy copy of the policy answers by itself while
        # fewer than 3 steps wait for the worker (held back in a block until the worker asks)...
        actions += [client.get_action(episode, obs) for obs in observations[3:6]]
        assert server.events.qsize() == 0
        # ...and then a call waits for the worker's sampling loop, which is not running
        with pytest.raises(errors.PolicyServerError) as info:
            client.get_action(episode, observations[6])
        assert info.value.code == "DEADLINE_EXCEEDED"
        tensorflow_calls = []
        policy.compute_outputs_of_actions = lambda *a, **k: tensorflow_calls.append(a)
        batch = worker.sample()  # the worker catches up with the waiting events
        np.testing.assert_allclose(batch[SampleBatch.OBS], np.stack(observations[2:4]))
        assert batch[SampleBatch.ACTIONS].tolist() == [int(a) for a in actions[2:4]]
        # the inline answers are recorded with the policy's own likelihood of each action and
        # its value prediction, computed by the server's numpy copy without a TensorFlow call
        assert tensorflow_calls == []
        expected = policy.compute_log_likelihoods(batch[SampleBatch.ACTIONS], batch[SampleBatch.OBS])
        np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP], expected, rtol=1e-5)
        np.testing.assert_allclose(batch[SampleBatch.VF_PREDS],
                                   policy.compute_values(batch[SampleBatch.OBS]), rtol=1e-4, atol=1e-6)
    finally:
        client.close()
        worker.stop()


def test_the_common_request_is_answered_in_one_step_and_any_other_by_the_general_path():
    """A float32 observation inside the bounds, a finite reward, a Discrete action: answered
    by `inline_answer` with the cached reply; any other request is left (None) to `get_action`,
    which converts it or says what is wrong. Both record the same kind of row."""
    worker = serving_worker("truncate_episodes", 3)
    server = worker.env
    sampler, sampled = sample_in_thread(worker)  # sample() gives the server its numpy copy
    client = PolicyClient(server.address, timeout=20)
    try:
        episode = client.start_episode()
        client.get_action(episode, np.zeros(4, np.float32))

        def request(observation, **fields):
            return pb.GetActionRequest(episode_id=fields.pop("episode_id", episode),
                                       observation=encode_value(observation), **fields)

        good = np.array([0.1, -0.2, 0.03, 0.4], np.float32)
        answer = server.inline_answer(request(good, reward=1.5))
        assert type(answer) is bytes
        action = int(np.frombuffer(pb.GetActionResponse.FromString(answer).action.leaves[0].data,
                                   np.int64)[0])
        assert action in (0, 1)
        not_common = {
            "float64": request(good.astype(np.float64)),
            "rank 2": request(good.reshape(2, 2)),
            "too short": request(good[:3]),
            "out of bounds": request(np.array([9.0, 0, 0, 0], np.float32)),
            "NaN": request(np.array([np.nan, 0, 0, 0], np.float32)),
            "infinite reward": request(good, reward=float("inf")),
            "agent fields": request(good, agent_rewards={"a": 1.0}),
        }
        for name, message in not_common.items():
            assert server.inline_answer(message) is None, name
        with pytest.raises(errors.ExternalEnvError, match="unknown episode id"):
            server.inline_answer(request(good, episode_id="nobody"))
        # the general path converts a float64 observation inside the space, refuses the others
        assert client.get_action(episode, good.astype(np.float64)) in (0, 1)
        with pytest.raises(errors.PolicyServerError, match="not in the observation space"):
            client.get_action(episode, np.array([np.nan, 0, 0, 0], np.float32))
        client.get_action(episode, -good)  # completes the third row
        sampler.join(20)
        batch = sampled[0]
    finally:
        client.close()
        worker.stop()
    np.testing.assert_allclose(batch[SampleBatch.OBS], [np.zeros(4), good, good])
    assert batch[SampleBatch.OBS].dtype == np.float32
    assert batch[SampleBatch.ACTIONS][1] == action
    np.testing.assert_allclose(batch[SampleBatch.REWARDS][:2], [1.5, 0.0])


@pytest.mark.parametrize("size", [3, 100])
def test_inline_answers_check_every_dimension_of_narrow_and_wide_observations(size):
    """A narrow space's bounds are compared as Python floats, a wide one's with numpy: either
    way each dimension's own bounds, NaN refused."""
    low = np.linspace(-1.0, 0.0, size, dtype=np.float32)
    high = low + 2.0
    space = gym.spaces.Box(low, high, dtype=np.float32)
    worker = RolloutWorker(lambda ctx: PolicyServer(space, gym.spaces.Discrete(3)), PGTFPolicy,
                           {"rollout_fragment_length": 1, "model": {"fcnet_hiddens": [8]}})
    server = worker.env
    sampler, _ = sample_in_thread(worker)  # gives the server its numpy copy
    client = PolicyClient(server.address, timeout=20)
    try:
        episode = client.start_episode()
        client.get_action(episode, low)
        client.get_action(episode, high)  # completes the worker's one row
        sampler.join(20)
        assert not sampler.is_alive()
        inside = (low + high) / 2
        answers = {}
        for name, index, value in [("inside", 0, inside[0]), ("at the low end", 0, low[0]),
                                   ("at the high end", size - 1, high[-1]),
                                   ("below the last low", size - 1, low[-1] - 0.01),
                                   ("above the first high", 0, high[0] + 0.01),
                                   ("NaN", size // 2, np.nan)]:
            observation = inside.copy()
            observation[index] = value
            answers[name] = server.inline_answer(pb.GetActionRequest(
                episode_id=episode, observation=encode_value(observation)))
    finally:
        client.close()
        worker.stop()
    assert all(type(answers[name]) is bytes
               for name in ("inside", "at the low end", "at the high end"))
    assert [name for name, answer in answers.items() if answer is None] == [
        "below the last low", "above the first high", "NaN"]


def test_inline_steps_reach_the_worker_in_blocks_in_order_with_the_episodes_other_calls():
    """Inline answers are held back in blocks (INLINE_BLOCK_ROWS steps); a logged action, the
    episode's end and the worker's idle moments send them on, so the rows are the steps as
    played: observations, actions, rewards (the first one's included) and likelihoods."""
    from tfrl.serving.policy_server import INLINE_BLOCK_ROWS

    steps = 2 * INLINE_BLOCK_ROWS + 20
    worker = serving_worker("complete_episodes", steps + 1)
    server = worker.env
    policy = worker.get_policy()
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(server.address, timeout=20)
    rng = np.random.default_rng(3)
    observations = [rng.uniform(-0.05, 0.05, 4).astype(np.float32) for _ in range(steps + 2)]
    try:
        episode = client.start_episode()
        client.log_returns(episode, 0.25)  # before the first step: counts for it
        actions = []
        for i in range(steps):
            if i == INLINE_BLOCK_ROWS + 7:  # an off-policy step in the middle of a block
                client.log_action(episode, observations[i], 1)
                actions.append(1)
            else:
                actions.append(client.get_action(episode, observations[i]))
            client.log_returns(episode, float(i))
        actions.append(client.get_action(episode, observations[steps]))
        client.log_returns(episode, -1.0)
        client.end_episode(episode, observations[steps + 1])
        sampler.join(30)
        batch = sampled[0]
    finally:
        client.close()
        worker.stop()
    np.testing.assert_allclose(batch[SampleBatch.OBS], np.stack(observations[:steps + 1]))
    np.testing.assert_allclose(batch[SampleBatch.NEXT_OBS], np.stack(observations[1:]))
    assert batch[SampleBatch.ACTIONS].tolist() == [int(a) for a in actions]
    expected_rewards = np.append(np.arange(steps, dtype=np.float64), -1.0)
    expected_rewards[0] += 0.25
    np.testing.assert_allclose(batch[SampleBatch.REWARDS], expected_rewards)
    assert batch[SampleBatch.TERMINATEDS].tolist() == [False] * steps + [True]
    np.testing.assert_allclose(
        batch[SampleBatch.ACTION_LOGP],
        policy.compute_log_likelihoods(batch[SampleBatch.ACTIONS], batch[SampleBatch.OBS]),
        rtol=1e-5)


def test_a_local_client_sends_steps_as_columns_and_the_rows_are_the_ones_played():
    worker = serving_worker("complete_episodes", 9)
    server = worker.env
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(server.address, "local", report_every=4, timeout=20)
    channel = grpc.insecure_channel(server.address)
    try:
        episode = client.start_episode()
        observations = [np.array([0.01 * i, 0.0, 0.02, -0.01 * i], np.float32) for i in range(10)]
        actions = []
        for i in range(9):  # reports go out every 4 steps, each episode's steps as columns
            actions.append(client.get_action(episode, observations[i]))
            client.log_returns(episode, float(i))
            client.log_returns(episode, 0.5)
        client.end_episode(episode, observations[9])
        sampler.join(20)
        batch = sampled[0]
        np.testing.assert_allclose(batch[SampleBatch.OBS], np.stack(observations[:9]))
        np.testing.assert_allclose(batch[SampleBatch.NEXT_OBS], np.stack(observations[1:]))
        assert batch[SampleBatch.ACTIONS].tolist() == [int(a) for a in actions]
        np.testing.assert_allclose(batch[SampleBatch.REWARDS], np.arange(9.0) + 0.5)
        assert batch[SampleBatch.TERMINATEDS].tolist() == [False] * 8 + [True]

        # a columnar call with a bad row is refused whole, with the row named
        other = client.start_episode()
        client.flush()
        rows = np.stack(observations[:3])
        rows[1, 2] = 9.0
        report = pb.ReportRequest(calls=[pb.Call(log_actions=pb.LogActionsRequest(
            episode_id=other, observations=encode_value(rows),
            actions=encode_value(np.array([0, 1, 0])), rewards=[0.0, 1.0, 2.0]))])
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary("/tfrl.serving.PolicyService/Report")(report.SerializeToString(),
                                                                     timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "step 1 of 3" in info.value.details() and "(log_actions)" in info.value.details()
        waiting = [server.events.get_nowait()[0] for _ in range(server.events.qsize())]
        assert waiting == ["start"]  # the episode's start; nothing of the refused call
    finally:
        channel.close()
        client.close()
        worker.stop()


def test_without_inline_inference_only_the_sampling_loop_answers():
    # The sampling loop must answer the first two actions within the timeout on a loaded machine;
    # the third waits the whole timeout for nobody.
    worker = serving_worker("truncate_episodes", 1, action_timeout_s=5.0, inline_inference=False)
    client = PolicyClient(worker.env.address, timeout=20)
    try:
        episode = client.start_episode()
        sampler = threading.Thread(target=worker.sample, daemon=True)
        sampler.start()
        obs = np.zeros(4, np.float32)
        client.get_action(episode, obs)
        client.get_action(episode, obs)  # completes the first row: sample() returns
        sampler.join(20)
        assert not sampler.is_alive()
        with pytest.raises(errors.PolicyServerError) as info:  # no sample() runs: no answer
            client.get_action(episode, obs)
        assert info.value.code == "DEADLINE_EXCEEDED"
    finally:
        client.close()
        worker.stop()


def test_a_local_client_clips_box_actions_as_its_worker_does_where_the_config_leaves_it_out():
    """The worker's config leaves clip_actions to COMMON_CONFIG (True): the worker clips, and so
    does a local-inference client, which once took False for a key the config left out."""
    box = gym.spaces.Box(-0.01, 0.01, (1,), np.float32)
    worker = RolloutWorker(
        lambda ctx: PolicyServer(CARTPOLE.observation_space, box), PGTFPolicy,
        {"batch_mode": "complete_episodes", "rollout_fragment_length": 4,
         "model": {"fcnet_hiddens": [8]}})
    sampler, sampled = sample_in_thread(worker)
    client = PolicyClient(worker.env.address, "local", timeout=20)
    try:
        assert "clip_actions" not in worker.config
        episode = client.start_episode()
        # exploring: a Gaussian of std about 1 around the policy's near-zero mean, so an
        # unclipped action falls outside these bounds almost every time
        actions = [np.asarray(client.get_action(episode, np.full(4, 0.01 * i, np.float32)))
                   for i in range(8)]
        client.end_episode(episode, np.zeros(4, np.float32))
        sampler.join(20)
        assert sampled
        assert all(a.shape == (1,) and -0.01 <= float(a[0]) <= 0.01 for a in actions), actions
    finally:
        client.close()
        worker.stop()
