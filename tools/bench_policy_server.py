"""The serving bridge's speed: one PolicyClient against a PolicyServer on loopback.

    python tools/bench_policy_server.py [--steps 5000] [--hiddens 64 64] [--jit]

The server is a RolloutWorker (PG policy, CartPole spaces, a `hiddens` network) sampling its
PolicyServer in a thread of this process; the client runs in a process of its own and plays one
long episode of `steps` actions:
  remote: every action a GetAction round trip (the server's policy answers), rewards logged
  local:  actions from the client's own copy of the policy, the calls sent in batches

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

    client = PolicyClient(address, inference_mode=mode, report_every=512)
    obs = np.zeros(4, np.float32)
    episode = client.start_episode()
    for _ in range(50):  # warm-up: first calls trace functions and open the channel
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--hiddens", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--modes", nargs="+", default=["remote", "local"])
    parser.add_argument("--jit", action="store_true",
                        help="the server's policy acts through its XLA-compiled action function")
    args = parser.parse_args()

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
        while not stop.is_set():
            worker.sample()

    sampler = threading.Thread(target=sample_forever, daemon=True)
    sampler.start()
    context = multiprocessing.get_context("spawn")
    try:
        for mode in args.modes:
            results = context.Queue()
            client = context.Process(target=client_side,
                                     args=(worker.env.address, mode, args.steps, results))
            client.start()
            rate, p50, p99 = results.get(timeout=600)
            client.join(60)
            print(f"case={mode}{'_jit' if args.jit and mode == 'remote' else ''} "
                  f"actions_per_s={rate:.0f} p50_ms={p50:.3f} p99_ms={p99:.3f}", flush=True)
    finally:
        stop.set()
        worker.stop()


if __name__ == "__main__":
    main()
