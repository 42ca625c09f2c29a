"""Settings of the policy optimizers and of the learners they build, one dataclass each.

Each optimizer reads its keys once, at construction, with `<Settings>.from_config(config)` from
the trainer's merged config (see tfrl/config/settings.py); the keys that shape sampling rounds
(num_envs_per_worker, rollout_fragment_length, batch_mode, observation_filter) come from the
rollout workers' `WorkerSettings`. The defaults live in COMMON_CONFIG and in the algorithms'
DEFAULT_CONFIG, never here.
"""
from __future__ import annotations

import dataclasses
from typing import Literal, Optional, Union

from tfrl.config.settings import Settings, setting


@dataclasses.dataclass(frozen=True)
class LearnerSettings(Settings):
    """The devices the learner of a replay-fed or multi-device optimizer runs on."""

    num_learner_devices: Union[Literal["auto"], int] = setting(
        "'auto': a MirroredStrategy over all local GPUs (else all logical CPUs); n: the first n",
        minimum=1)


@dataclasses.dataclass(frozen=True)
class SyncSamplesSettings(Settings):
    """SyncSamplesOptimizer (and LocalMultiDeviceOptimizer): minibatch SGD on train batches of
    synchronous samples."""

    train_batch_size: int = setting("env steps sampled per learn step", minimum=1)
    num_sgd_iter: int = setting("epochs over each train batch", minimum=1)
    sgd_minibatch_size: Optional[int] = setting(
        "rows per minibatch step (None: the whole train batch)", minimum=1)
    jit_compile_learner: bool = setting(
        "compile the epochs of minibatch steps with XLA (one learner device; a loss XLA cannot "
        "compile trains through the plain graph)")

    @property
    def minibatch_size(self) -> int:
        """The minibatch size, the whole train batch when sgd_minibatch_size is None."""
        return self.sgd_minibatch_size or self.train_batch_size


@dataclasses.dataclass(frozen=True)
class AsyncGradientsSettings(Settings):
    """AsyncGradientsOptimizer: worker gradients applied by the driver as they arrive."""

    grads_per_step: int = setting("worker gradients applied per optimizer step", minimum=1)


@dataclasses.dataclass(frozen=True)
class SyncReplaySettings(Settings):
    """SyncReplayOptimizer: learning from a uniform or prioritized replay table."""

    train_batch_size: int = setting("rows per learner step (over all replicas)", minimum=1)
    buffer_size: int = setting("items each replay table holds (oldest evicted first)", minimum=1)
    learning_starts: int = setting(
        "items a table must hold before learning starts (at least 1 is used)", minimum=0)
    training_intensity: Optional[float] = setting(
        "trained / inserted items ratio (None: one train batch per sampling round)", above=0)
    prioritized_replay: bool = setting("prioritized (True) or uniform (False) sampling")
    prioritized_replay_alpha: float = setting(
        "priority exponent of the prioritized sampler", minimum=0)
    prioritized_replay_beta: float = setting(
        "initial importance-weight exponent beta", minimum=0, maximum=1)
    final_prioritized_replay_beta: float = setting(
        "beta reached after the annealing timesteps", minimum=0, maximum=1)
    prioritized_replay_beta_annealing_timesteps: int = setting(
        "sampled env steps over which beta is annealed linearly", minimum=0)
    prioritized_replay_eps: float = setting(
        "added to |TD error| so every new priority is positive", above=0)
    broadcast_interval: int = setting(
        "sampling rounds between weight broadcasts to the remote workers", minimum=1)


@dataclasses.dataclass(frozen=True)
class AsyncSamplesSettings(Settings):
    """AsyncSamplesOptimizer (IMPALA, APPO): workers sample asynchronously into a learner queue
    table; a learner thread learns on whole trajectory fragments."""

    train_batch_size: int = setting(
        "env steps per learner batch (a multiple of rollout_fragment_length)", minimum=1)
    num_sgd_iter: int = setting("gradient steps on each train batch", minimum=1)
    minibatch_buffer_size: int = setting(
        "train batches the learner cycles through, one step on each in turn", minimum=1)
    learner_queue_size: int = setting(
        "trajectory fragments the learner queue table holds before writers wait", minimum=1)
    max_sample_requests_in_flight_per_worker: int = setting(
        "sample() calls each remote worker has outstanding", minimum=1)
    broadcast_interval: int = setting(
        "learner steps between two refreshes of the weights sent to workers", minimum=1)


@dataclasses.dataclass(frozen=True)
class AsyncReplaySettings(Settings):
    """AsyncReplayOptimizer (Ape-X): asynchronous sampling into replay shards, a learner thread
    reading from all of them."""

    train_batch_size: int = setting("rows per learner step (over all replicas)", minimum=1)
    buffer_size: int = setting("items all replay shards hold together (each holds its share)",
                               minimum=1)
    learning_starts: int = setting(
        "items all shards must hold together before learning starts", minimum=0)
    training_intensity: Optional[float] = setting(
        "trained / inserted items ratio each shard holds (None: learn as fast as possible)",
        above=0)
    prioritized_replay: bool = setting("prioritized (True) or uniform (False) sampling")
    prioritized_replay_alpha: float = setting(
        "priority exponent of the prioritized sampler", minimum=0)
    prioritized_replay_beta: float = setting("importance-weight exponent beta", minimum=0,
                                             maximum=1)
    prioritized_replay_eps: float = setting(
        "added to |TD error| so every new priority is positive", above=0)
    num_replay_shards: int = setting("replay servers the trainer starts", minimum=1)
    replay_shard_addresses: Optional[list] = setting(
        "host:port of external replay servers to use as shards instead (None: start them)")
    max_weight_sync_delay: int = setting(
        "learner steps between weight publications (workers take the newest before sampling; "
        "a version is published only after a worker took the previous one)",
        minimum=1)
    max_sample_requests_in_flight_per_worker: int = setting(
        "sample() calls each remote worker has outstanding", minimum=1)
    target_network_update_freq: int = setting(
        "trained rows between target network updates", minimum=1)
    learner_steps_per_call: int = setting(
        "gradient steps per learner call (one priority update per call)", minimum=1)
    per_worker_exploration: bool = setting(
        "constant epsilon per worker, eps_i = eps ** (1 + i / (N - 1) * alpha)")
    worker_epsilon: float = setting("eps of the per-worker epsilons", minimum=0, maximum=1)
    worker_epsilon_alpha: float = setting("alpha of the per-worker epsilons", minimum=0)
    replay_shard_checkpoint_dir: Optional[str] = setting(
        "directory the shards the trainer starts checkpoint into, and a lost shard is restarted "
        "from (shared storage on a cluster; None: a lost shard is dropped)")
    replay_shard_checkpoint_interval_s: float = setting(
        "seconds between shard checkpoints (with replay_shard_checkpoint_dir)", above=0)
    replay_shard_check_interval_s: float = setting(
        "seconds between checks that every replay shard still answers", above=0)


@dataclasses.dataclass(frozen=True)
class OptimizerChoiceSettings(Settings):
    """Which policy optimizer a trainer builds (tfrl/optimizers/selection.py)."""

    optimizer: Union[str, dict] = setting(
        "a strategy name (sync_samples, multi_device, async_gradients, sharded_ps, allreduce, "
        "auto), or classic RLlib's dict of optimizer arguments ({}: the algorithm's choice)")


@dataclasses.dataclass(frozen=True)
class ShardedPSSettings(Settings):
    """ShardedParameterServerOptimizer: gradients pushed slice by slice to parameter shards."""

    train_batch_size: int = setting("env steps trained (gradients applied) per optimizer step",
                                    minimum=1)
    num_ps_shards: int = setting("parameter shard actors the flat weights are split over",
                                 minimum=1)


@dataclasses.dataclass(frozen=True)
class AllreduceSettings(Settings):
    """AllreduceOptimizer: minibatch SGD on every worker's own samples, gradients averaged by
    allreduce."""

    train_batch_size: int = setting(
        "env steps sampled per optimizer step, over all workers (each samples its share)",
        minimum=1)
    num_sgd_iter: int = setting("epochs over each worker's share of the train batch", minimum=1)
    sgd_minibatch_size: Optional[int] = setting(
        "rows per minibatch step over all workers (None: the whole train batch)", minimum=1)
    shuffle_sequences: bool = setting("shuffle each worker's rows between epochs")


@dataclasses.dataclass(frozen=True)
class AdaptiveSettings(Settings):
    """AdaptiveOptimizer (`optimizer: auto`): measure the candidates, keep the fastest."""

    auto_candidates: Optional[list] = setting(
        "strategy names to measure (None: every strategy the algorithm allows)")
    auto_warmup_steps: int = setting(
        "optimizer steps of each trial that are not measured (tracing, actor start)", minimum=0)
    auto_trial_steps: int = setting("optimizer steps each trial measures", minimum=1)
    auto_abandon_ratio: float = setting(
        "a trial ends after its first measured step when that step's rate is below this "
        "fraction of the best rate measured so far (0: every trial runs all its steps)",
        minimum=0.0, maximum=1.0)
