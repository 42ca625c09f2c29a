"""AsyncGradientsOptimizer: A3C's strategy. Workers sample and compute gradients on their own
fragments; the driver applies each gradient as soon as it arrives (`ray.wait`) and sends fresh
weights back to that worker only, which immediately starts its next fragment.

No replay table is involved: the gradients are the only data that reach the driver. With
several policies (multi-agent), a worker returns one gradient per policy in `policies_to_train`
that acted in its fragment, and each is applied to its own policy.
"""
from __future__ import annotations

from typing import Optional

from tfrl import errors
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.settings import AsyncGradientsSettings


class AsyncGradientsOptimizer(PolicyOptimizer):
    """Config keys: those of AsyncGradientsSettings (read once, here).

    Raises (constructor):
      InvalidConfigError: no remote workers, or a missing or bad grads_per_step.
    """

    results_bring_episodes = True  # every gradient

    def __init__(self, workers, config: Optional[dict] = None, replay=None, **settings):
        super().__init__(workers, config, replay, **settings)
        config = self.config
        if not workers.remote_workers():
            raise errors.InvalidConfigError(
                "AsyncGradientsOptimizer needs remote workers to compute gradients; set "
                "num_workers >= 1")
        self.settings = AsyncGradientsSettings.from_config(config)
        self.grads_per_step = self.settings.grads_per_step
        local = workers.local_worker()
        self.policy_ids = list(local.policies_to_train)
        self.policy = local.get_policy(self.policy_ids[0])
        self._pending = {}

    def _launch(self, worker, weights_ref) -> None:
        if weights_ref is not None:
            worker.set_weights.remote(weights_ref, {"timestep": self.num_steps_sampled})
        self._pending[worker.sample_and_compute_gradients.remote()] = worker

    def step(self) -> dict:
        import ray

        if not self._pending:
            weights = ray.put(self.workers.local_worker().get_weights())
            for worker in self.workers.remote_workers():
                self._launch(worker, weights)
        applied = 0
        while applied < self.grads_per_step:
            with self.timer("wait"):
                ready, _ = ray.wait(list(self._pending), num_returns=1)
            worker = self._pending.pop(ready[0])
            try:
                grads, info, count, episodes = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - a dead worker is replaced, others re-raise
                from tfrl.rollout.worker_set import is_worker_failure

                if not is_worker_failure(exc) or worker not in self.workers.remote_workers():
                    raise
                worker = self.workers.recreate_worker(worker, exc)
                if worker is not None:
                    self._launch(worker, ray.put(self.workers.local_worker().get_weights()))
                continue
            if not isinstance(grads, dict):  # one policy: its gradients and stats alone
                grads, info = {self.policy_ids[0]: grads}, {self.policy_ids[0]: info}
            local = self.workers.local_worker()
            with self.timer("apply"):
                for pid, policy_grads in grads.items():
                    local.get_policy(pid).apply_gradients(policy_grads)
            self._new_episodes.extend(episodes)
            self.num_steps_sampled += count
            self.num_steps_trained += count
            self.learner_stats = dict(self.learner_stats, **info)
            for pid in self.policy_ids:
                local.get_policy(pid).on_global_var_update({"timestep": self.num_steps_sampled})
            self._launch(worker, ray.put(self.workers.local_worker().get_weights()))
            applied += 1
        return self.learner_stats

    def deactivate(self) -> None:
        """Waits for the gradients in flight and drops them (the episodes they bring are kept)."""
        import ray

        if self._pending:
            ray.wait(list(self._pending), num_returns=len(self._pending))
        self._keep_episodes_of(list(self._pending))
        self._pending.clear()

    def stop(self) -> None:
        self._pending.clear()
        super().stop()
