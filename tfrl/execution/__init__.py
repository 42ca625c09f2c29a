"""Execution plans, part of the optimizers layer: classic RLlib's dataflow API (Ray 0.8.5-1.x).

A trainer declared with `build_trainer(..., execution_plan=fn)` gets its training loop from
`fn(workers, config)`, an iterator of result dicts built from the operators here, instead of a
policy optimizer. Everything runs in the driver's process, pulled one item at a time; the remote
rollout workers are the only other processes.

- local_iterator.py: `LocalIterator` (for_each, filter, combine, duplicate, union, ...) and
  the not-ready marker that lets a pulled operator say "nothing yet"
- metrics_context.py: the counters, timers and info that a plan's operators share
  (`get_shared_metrics`)
- parallel_iterator.py: `ParallelIterator`, one shard per remote rollout worker
  (gather_sync, gather_async, batch_across_shards)
- rollout_ops.py: ParallelRollouts, ConcatBatches, SelectExperiences, StandardizeFields
- replay_buffer.py: `LocalReplayBuffer`, a per-policy uniform or prioritized buffer in the driver
- replay_ops.py: StoreToReplayBuffer, Replay
- train_ops.py: TrainOneStep, UpdateTargetNetwork
- concurrency_ops.py: Concurrently, Enqueue, Dequeue
- metric_ops.py: StandardMetricsReporting, CollectMetrics and their throttles
- plan.py: `ExecutionPlan`, what a trainer holds of its plan (results, counters, checkpoints)
"""
