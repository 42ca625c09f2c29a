"""NumpyQPolicy: DQN's rollout-worker side in numpy, so sampling workers start no TensorFlow.

Where it sits: a rollout worker (tfrl/rollout) acts, postprocesses and, for Ape-X, rates its
transitions; the learner trains DQNTFPolicy (dqn_policy.py). Like NumpyPolicy for the actor-critic
policies (tfrl/policy/numpy_policy.py, whose `NumpyStandIn` this extends), `WorkerSet` hands its
remote workers a `NumpyQPolicySpec` instead of the policy class when `numpy_rollout_workers` is
on and `numpy_q_policy_spec` (dqn_policy.py) accepts the local policy (DQNTFPolicy as declared,
its own `QNetwork` with a dense trunk on flat Box observations, dueling or not). A `NumpyQPolicy`:

- acts epsilon-greedily over its Q-values, epsilon from the policy's schedule at the global
  timestep, or the constant a trainer sets (`set_epsilon_schedule`, Ape-X's per-worker
  epsilons); no extra outputs, as the TF policy has none;
- postprocesses into n-step transitions (`postprocess_nstep_and_prio`) and, with
  `worker_side_prioritization`, rates each fragment's transitions with the TD error of the loss
  (double Q, `q_target_bounds`) from its online network and the target network the learner
  publishes (`set_target_weights`);
- builds the TF policy on first use for anything else, handing over its weights, target
  weights and epsilon schedule.

A TensorFlow call costs a quarter of a millisecond or more per step of a worker's envs; on
CartPole these few matrix products take tens of microseconds.
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple

import numpy as np

from tfrl.policy.numpy_actor import forward
from tfrl.policy.numpy_policy import (NumpyStandIn, NumpyStandInSpec, dense_layers)
from tfrl.policy.sample_batch import SampleBatch
from tfrl.utils.schedules import epsilon_schedule_from_config

Layers = Tuple[Tuple[int, int, str], ...]


def rate_transitions(policy, batch: SampleBatch) -> SampleBatch:
    """Adds a `priorities` column, |td_error| + prioritized_replay_eps from `policy`'s
    `compute_td_error` (its online and target networks): each transition's initial replay
    priority (Ape-X's worker-side prioritization). One call for the whole fragment."""
    td_error = policy.compute_td_error(
        batch[SampleBatch.OBS], batch[SampleBatch.ACTIONS], batch[SampleBatch.REWARDS],
        batch[SampleBatch.NEXT_OBS], batch[SampleBatch.TERMINATEDS],
        batch[SampleBatch.PRIO_WEIGHTS], **{SampleBatch.N_STEPS: batch[SampleBatch.N_STEPS]})
    batch["priorities"] = (np.abs(td_error)
                           + float(policy.config["prioritized_replay_eps"])).astype(np.float32)
    return batch


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyQPolicySpec(NumpyStandInSpec):
    """A NumpyQPolicy's spec (NumpyStandInSpec's attributes, and:)

    Attributes:
      trunk_layers: (kernel index, bias index, activation name) of the dense trunk, input to
        output, indices into `get_weights()`.
      head_layers: the advantage stream (dueling) or the Q stream, ending in one output per
        action.
      value_layers: the state-value stream (dueling), else empty.
      target_order: for each target-model variable, the index of the `get_weights()` entry it
        mirrors.
    """

    trunk_layers: Layers
    head_layers: Layers
    value_layers: Layers
    target_order: Tuple[int, ...]


class NumpyQPolicy(NumpyStandIn):
    """DQNTFPolicy's acting and worker-side postprocessing in numpy (module docstring)."""

    def __init__(self, spec: NumpyQPolicySpec, observation_space, action_space, config=None):
        # the target network starts as the online one, as TargetNetworkMixin's hard copy does
        self._target_weights = [np.asarray(w, np.float32) for w in spec.initial_weights]
        super().__init__(spec, observation_space, action_space, config)
        self.epsilon_schedule = epsilon_schedule_from_config(self.config["exploration_config"])
        self._num_actions = int(action_space.n)

    # --- networks -------------------------------------------------------------------------------
    def _load_weights(self) -> None:
        self._online = self._network(self._weights)
        self._target = self._network(self._target_weights)

    def _network(self, weights: Sequence[np.ndarray]) -> tuple:
        spec = self._spec
        return (dense_layers(weights, spec.trunk_layers), dense_layers(weights, spec.head_layers),
                dense_layers(weights, spec.value_layers))

    @staticmethod
    def _q_values(network: tuple, x: np.ndarray) -> np.ndarray:
        trunk, head, value = network
        features = forward(trunk, x)
        if not value:
            return forward(head, features)
        advantages = forward(head, features)
        return forward(value, features) + advantages - advantages.mean(axis=1, keepdims=True)

    def _read_tf_policy(self, tf_policy) -> None:
        self._target_weights = self._from_target_order(
            [v.numpy() for v in tf_policy.target_model.variables])
        super()._read_tf_policy(tf_policy)

    def _from_target_order(self, target_weights) -> List[np.ndarray]:
        ordered: List[Optional[np.ndarray]] = [None] * len(self._spec.initial_weights)
        for value, position in zip(target_weights, self._spec.target_order):
            ordered[position] = np.asarray(value, np.float32)
        return ordered

    def _in_target_order(self, weights: Sequence[np.ndarray]) -> List[np.ndarray]:
        """`weights` (in `get_weights` order) in the target model's variable order."""
        return [weights[i] for i in self._spec.target_order]

    def _hand_over_state(self, tf_policy) -> None:
        tf_policy.set_epsilon_schedule(self.epsilon_schedule)
        tf_policy.set_target_weights(self._in_target_order(self._target_weights))

    def set_target_weights(self, weights) -> None:
        """Sets the target network, given in the TF policy's `target_model.variables` order.

        Raises:
          CheckpointError: their number or shapes do not match the target network's.
        """
        self._check_shapes(weights, self._in_target_order(self._spec.initial_weights),
                           "target weights")
        self._current_weights()  # read the TF policy first where it may have changed them
        if self._tf is not None:
            self._tf.set_target_weights(weights)
        self._target_weights = self._from_target_order(weights)
        self._load_weights()

    # --- exploration ----------------------------------------------------------------------------
    def set_epsilon_schedule(self, schedule) -> None:
        """Replaces the epsilon schedule (e.g. Ape-X's constant per-worker epsilon), in effect
        from the next computed action."""
        self.epsilon_schedule = schedule
        if self._tf is not None:
            self._tf.set_epsilon_schedule(schedule)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs):
        """(actions int64 [B], [], {}): the greedy action, replaced by a uniform random one with
        probability epsilon when exploring.

        Raises:
          InvalidBatchError: observations that do not fit the observation space.
        """
        explore = self.config["explore"] if explore is None else bool(explore)
        x = self._flat_obs(obs_batch)
        self._current_weights()  # read again from the TF policy if it may have changed them
        actions = self._q_values(self._online, x).argmax(axis=1).astype(np.int64)
        epsilon = self.epsilon_schedule.value(
            self.global_timestep if timestep is None else int(timestep)) if explore else 0.0
        if epsilon > 0.0:
            replaced = self._rng.random(len(x)) < epsilon
            actions[replaced] = self._rng.integers(0, self._num_actions, int(replaced.sum()))
        self.global_timestep += len(x)
        return actions, [], {}

    # --- worker-side prioritization -------------------------------------------------------------
    def compute_td_error(self, obs_t, act_t, rew_t, obs_tp1, terminateds_mask,
                         importance_weights=None, **extra_columns) -> np.ndarray:
        """TD errors [B] as DQNTFPolicy's loss computes them (float32)."""
        self._current_weights()
        config = self.config
        q_t = self._q_values(self._online, self._flat_obs(obs_t))
        next_x = self._flat_obs(obs_tp1)
        q_tp1_target = self._q_values(self._target, next_x)
        chooser = self._q_values(self._online, next_x) if config["double_q"] else q_tp1_target
        rows = np.arange(len(q_t))
        q_tp1_best = q_tp1_target[rows, chooser.argmax(axis=1)]
        rewards = np.asarray(rew_t, np.float32)
        n_steps = np.asarray(extra_columns.get(SampleBatch.N_STEPS, np.ones_like(rewards)),
                             np.float32)
        not_terminated = 1.0 - np.asarray(terminateds_mask, np.float32)
        targets = rewards + np.float32(config["gamma"]) ** n_steps * not_terminated * q_tp1_best
        if config.get("q_target_bounds") is not None:
            low, high = config["q_target_bounds"]
            targets = np.clip(targets, float(low), float(high))
        selected = q_t[rows, np.asarray(act_t, np.int64)]
        return (selected - targets).astype(np.float32)

    def postprocess_fragment(self, batch):
        if self.config.get("worker_side_prioritization") and batch.count:
            return rate_transitions(self, batch)
        return batch


NumpyQPolicySpec.stand_in = NumpyQPolicy
