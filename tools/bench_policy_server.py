"""The serving bridge's speed: one PolicyClient against a PolicyServer on loopback.

    python tools/bench_policy_server.py [--steps 5000] [--hiddens 64 64] [--jit]

The server is a RolloutWorker (PG policy, CartPole spaces, a `hiddens` network) sampling its
PolicyServer in a thread of this process; the client runs in a process of its own and plays one
long episode of `steps` actions:
  remote:          every action a round trip on the client's action stream; the server answers
                   with its numpy copy of the worker's policy (inline inference)
  remote_sampled:  the same with `inline_inference` off: the worker's sampling loop answers
  local:           actions from the client's own copy of the policy, the steps sent in columns
  floor:           the remote client against a bare gRPC server of the same service that answers
                   every request with a fixed action and does nothing else: what the gRPC round
                   trip alone allows on this machine

Prints one line per case:

    case=remote actions_per_s=.. p50_ms=.. p99_ms=..
"""
import argparse
import multiprocessing
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def client_side(address: str, mode: str, steps: int, results) -> None:
    import numpy as np

    from tfrl.serving import PolicyClient

    client = PolicyClient(address, inference_mode="local" if mode == "local" else "remote",
                          report_every=512)
    obs = np.zeros(4, np.float32)
    episode = client.start_episode()
    for _ in range(250):  # warm-up: traces functions, opens the channel, starts a new sample()
        client.get_action(episode, obs)
        client.log_returns(episode, 1.0)
    latencies = []
    started = time.perf_counter()
    for i in range(steps):
        obs = np.array([0.01 * (i % 100), 0.0, 0.01, 0.0], np.float32)
        t = time.perf_counter()
        client.get_action(episode, obs)
        latencies.append(time.perf_counter() - t)
        client.log_returns(episode, 1.0)
    client.end_episode(episode, obs)
    elapsed = time.perf_counter() - started
    client.close()
    latencies.sort()
    results.put((steps / elapsed, 1000 * latencies[len(latencies) // 2],
                 1000 * latencies[int(len(latencies) * 0.99)]))


def bare_server():
    """A gRPC server of the policy service that answers with a fixed action and does nothing
    else (the `floor` case)."""
    import concurrent.futures

    import grpc
    import numpy as np

    from tfrl.serving.proto import policy_service_pb2 as pb
    from tfrl.serving.values import encode_value

    fixed = pb.GetActionResponse(action=encode_value(np.int64(0))).SerializeToString()
    started = pb.StartEpisodeResponse(episode_id="floor").SerializeToString()
    empty = pb.Empty().SerializeToString()

    def stream(requests, context):
        for _ in requests:
            yield fixed

    handlers = {"StartEpisode": grpc.unary_unary_rpc_method_handler(lambda r, c: started),
                "EndEpisode": grpc.unary_unary_rpc_method_handler(lambda r, c: empty),
                "GetActionStream": grpc.stream_stream_rpc_method_handler(stream)}
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "tfrl.serving.PolicyService", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"localhost:{port}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--hiddens", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--modes", nargs="+",
                        default=["remote", "remote_sampled", "local", "floor"],
                        choices=["remote", "remote_sampled", "local", "floor"])
    parser.add_argument("--jit", action="store_true",
                        help="the server's policy acts through its XLA-compiled action function")
    args = parser.parse_args(argv)

    import gymnasium as gym

    from tfrl.agents.pg.pg_policy import PGTFPolicy
    from tfrl.rollout import RolloutWorker
    from tfrl.serving import PolicyServer

    spaces = gym.make("CartPole-v1")
    worker = RolloutWorker(
        lambda ctx: PolicyServer(spaces.observation_space, spaces.action_space),
        PGTFPolicy, {"rollout_fragment_length": 200, "model": {"fcnet_hiddens": args.hiddens},
                     "jit_compile_actions": bool(args.jit)})
    stop = threading.Event()

    def sample_forever():
        from tfrl.errors import ExternalEnvError

        while not stop.is_set():
            try:
                worker.sample()
            except ExternalEnvError:  # the server closed at the end of the run
                if not stop.is_set():
                    raise

    sampler = threading.Thread(target=sample_forever, daemon=True)
    sampler.start()
    context = multiprocessing.get_context("spawn")
    try:
        for mode in args.modes:
            worker.env.inline_inference = mode != "remote_sampled"  # from the next sample() on
            bare, address = bare_server() if mode == "floor" else (None, worker.env.address)
            results = context.Queue()
            client = context.Process(target=client_side, args=(address, mode, args.steps, results))
            client.start()
            rate, p50, p99 = results.get(timeout=600)
            client.join(60)
            if bare is not None:
                bare.stop(None)
            print(f"case={mode}{'_jit' if args.jit and mode == 'remote' else ''} "
                  f"actions_per_s={rate:.0f} p50_ms={p50:.3f} p99_ms={p99:.3f}", flush=True)
    finally:
        stop.set()
        worker.stop()


if __name__ == "__main__":
    main()
