"""Ape-X under many writers for a long time: does anything stall?

    python tools/soak_apex.py [--workers 8] [--envs-per-worker 8] [--shards 2] [--seconds 600]

Runs APEX on CartPole-v1 (a small network, the learner as fast as it can) and prints one line
per `--every` seconds: env steps sampled and rows trained in that interval, and the items each
shard holds. The last line gives the longest interval in which no env step was sampled or no
row trained (a stall shows as a long one) and the totals; a complete stall of sampling shows
as lines that stop coming (an iteration waits for its env steps).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--envs-per-worker", type=int, default=8)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--every", type=float, default=30.0)
    args = parser.parse_args(argv)
    import ray

    from tfrl.agents.dqn import ApexTrainer
    from tfrl.optimizers.async_replay_optimizer import REPLAY_TABLE

    ray.init(num_cpus=max(args.workers, os.cpu_count() or 1), include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    trainer = ApexTrainer(env="CartPole-v1", config={
        "num_workers": args.workers, "num_envs_per_worker": args.envs_per_worker,
        "rollout_fragment_length": 50, "num_replay_shards": args.shards,
        "num_cpus_per_worker": os.cpu_count() / max(args.workers, 1),
        "learning_starts": 5000, "buffer_size": 200000, "train_batch_size": 64,
        "target_network_update_freq": 20000, "max_weight_sync_delay": 50,
        "timesteps_per_iteration": 1000, "min_iter_time_s": 0, "driver_tf_threads": 1,
        "hiddens": [64], "model": {"fcnet_hiddens": [64]}})
    optimizer = trainer.optimizer
    start = last = time.time()
    last_sampled = last_trained = 0
    idle_sampling = idle_training = 0.0
    longest_no_sample = longest_no_train = 0.0
    try:
        while time.time() - start < args.seconds:
            trainer.train()
            now = time.time()
            if now - last < args.every:
                continue
            sampled, trained = optimizer.num_steps_sampled, optimizer.num_steps_trained
            idle_sampling = idle_sampling + (now - last) if sampled == last_sampled else 0.0
            idle_training = idle_training + (now - last) if trained == last_trained else 0.0
            longest_no_sample = max(longest_no_sample, idle_sampling)
            longest_no_train = max(longest_no_train, idle_training)
            sizes = [optimizer.shards.client(i).server_info()[REPLAY_TABLE].current_size
                     for i in range(optimizer.num_shards)]
            print(f"t={now - start:.0f}s sampled={sampled - last_sampled} "
                  f"trained={trained - last_trained} shard_sizes={sizes} "
                  f"load_avg_1m={os.getloadavg()[0]:.1f}", flush=True)
            last, last_sampled, last_trained = now, sampled, trained
        elapsed = time.time() - start
        print(f"soak workers={args.workers} envs_per_worker={args.envs_per_worker} "
              f"shards={args.shards} seconds={elapsed:.0f} env_steps={optimizer.num_steps_sampled} "
              f"rows_trained={optimizer.num_steps_trained} "
              f"longest_without_sampling_s={longest_no_sample:.0f} "
              f"longest_without_training_s={longest_no_train:.0f} "
              f"worker_failures={trainer.workers.num_worker_failures}", flush=True)
    finally:
        trainer.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()
