"""ES throughput and the driver's inbound traffic, one line per case.

For 1, 2, 4 and 8 workers, flat (every worker's results reach the driver) and with the
aggregation tree (one leaf aggregator per two workers, fan-in 2, one root): perturbed and
evaluation episodes per second, and the bytes the driver received per iteration.

    python tools/bench_es.py --iterations 3
"""
import argparse
import time

import ray

from tfrl.agents.es.es import ESTrainer


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args(argv)
    ray.init(num_cpus=max(args.workers), include_dashboard=False, log_to_driver=False)
    for workers in args.workers:
        for aggregators in (0, max(1, workers // 2)):
            trainer = ESTrainer(env=args.env, config={
                "num_workers": workers, "num_aggregators": aggregators, "aggregation_fan_in": 2,
                "noise_size": 2_000_000, "episodes_per_batch": 80, "train_batch_size": 0,
                "perturbations_per_round": 5, "eval_prob": 0.2, "seed": 0,
                "model": {"fcnet_hiddens": [16]}, "num_cpus_per_worker": 1})
            try:
                trainer.train()  # warm-up: actors started, first rollouts
                start, episodes, received = time.time(), 0, 0
                for _ in range(args.iterations):
                    result = trainer.train()
                    episodes += result["episodes_this_iter"]
                    received += result["info"]["driver_bytes_received"]
                elapsed = time.time() - start
            finally:
                trainer.stop()
            print(f"es workers={workers} aggregators={aggregators} "
                  f"episodes/s={episodes / elapsed:.1f} "
                  f"driver_bytes/iter={received / args.iterations:.0f}", flush=True)


if __name__ == "__main__":
    main()
