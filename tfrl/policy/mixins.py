"""Policy mixins: reusable stateful pieces shared by several algorithms (RLlib classic).

Pass them to build_tf_policy(mixins=[...]); they come before TFPolicy in the class's bases,
so their methods win. TFPolicy calls each mixin's `_setup_mixin(self)` after the model and
optimizer exist and before the dummy loss pass, and `_after_loss_init_mixin(self)` after it;
you do not call them yourself. Config keys read are listed per mixin. Schedule values are
computed on the Python side in `on_global_var_update` and written into variables the traced
loss reads, so changing them never retraces. Classic explicit set-up calls
(`KLCoeffMixin.__init__(policy, config)` in a hook) are accepted and change nothing
(ClassicSetupCall).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from tfrl.config.settings import Settings, setting
from tfrl.errors import InvalidConfigError, NotSupportedError
from tfrl.models.catalog import ModelCatalog
from tfrl.policy.sample_batch import SampleBatch
from tfrl.utils.schedules import make_schedule
from tfrl.utils.tf_ops import assign_scalar


class ClassicSetupCall:
    """Base of the mixins here: accepts classic RLlib's explicit set-up calls.

    Classic policies set their mixins up by hand in a hook, e.g.
    `KLCoeffMixin.__init__(policy, config)` or `LearningRateSchedule.__init__(policy, lr,
    lr_schedule)` in before_loss_init. tfrl sets every mixin up itself from the policy config
    (`_setup_mixin`) before that hook runs, so such a call changes nothing. While a policy is
    being constructed (no spaces assigned yet) the call passes on along the MRO to TFPolicy.
    """

    def __init__(self, *args, **kwargs):
        if "observation_space" in vars(self):
            return  # an explicit classic set-up call on a built policy: already set up
        super().__init__(*args, **kwargs)


class LearningRateSchedule(ClassicSetupCall):
    """Sets the optimizer's learning rate from config `lr_schedule` ([[t, lr], ...]) or `lr`.

    Attributes: `cur_lr` (float), `lr_schedule` (Schedule).
    """

    def _setup_mixin(self):
        self.lr_schedule = make_schedule(self.config["lr"], self.config.get("lr_schedule"))
        self.cur_lr = self.lr_schedule.value(self.global_timestep)
        self.optimizer.learning_rate = self.cur_lr

    def on_global_var_update(self, global_vars: Dict) -> None:
        super().on_global_var_update(global_vars)
        value = self.lr_schedule.value(self.global_timestep)
        if value == self.cur_lr:
            return
        self.cur_lr = value
        # This runs on the learner's thread before every sampling round, where a profile put
        # the `optimizer.learning_rate = ...` setter at about 3 ms per round under load. An
        # unchanged rate (a constant lr) is not written at all, and a changed one goes straight
        # to the variable, skipping Keras's attribute tracking.
        variable = self.optimizer.learning_rate
        if isinstance(variable, tf.Variable):
            assign_scalar(variable, value)
        else:
            self.optimizer.learning_rate = value


def setup_scheduled_coefficient(policy, name: str, initial: float, schedule) -> None:
    """Gives `policy` a non-trainable float32 tf.Variable `policy.<name>` (what a loss reads)
    that follows `schedule` ([[t, value], ...], None: constant `initial`), and the Schedule as
    `policy.<name>_schedule`; the variable is part of the policy's state. Pair it with
    `update_scheduled_coefficient` in `on_global_var_update`."""
    coefficient_schedule = make_schedule(initial, schedule)
    variable = tf.Variable(coefficient_schedule.value(policy.global_timestep), trainable=False,
                           dtype=tf.float32, name=name)
    setattr(policy, f"{name}_schedule", coefficient_schedule)
    setattr(policy, name, variable)
    policy._extra_state_variables[name] = [variable]  # noqa: SLF001 - the mixins' shared state


def update_scheduled_coefficient(policy, name: str) -> None:
    """Sets `policy.<name>` to its schedule's value at the policy's global timestep (an unchanged
    value is not written: an assign to a strategy's variable costs most of a millisecond, and
    this runs before every sampling round)."""
    value = float(getattr(policy, f"{name}_schedule").value(policy.global_timestep))
    written = policy.__dict__.setdefault("_scheduled_values_written", {})
    if written.get(name) != value:
        assign_scalar(getattr(policy, name), value)
        written[name] = value


@dataclasses.dataclass(frozen=True)
class EntropySettings(Settings):
    """The config key of EntropyCoeffSchedule."""

    entropy_coeff: float = setting("weight of the entropy bonus in the loss")


@dataclasses.dataclass(frozen=True)
class KLSettings(Settings):
    """The config keys of KLCoeffMixin."""

    kl_coeff: float = setting("initial coefficient of the KL penalty", minimum=0)
    kl_target: float = setting("KL divergence the coefficient adapts towards", above=0)


@dataclasses.dataclass(frozen=True)
class TargetNetworkSettings(Settings):
    """The config key of TargetNetworkMixin."""

    tau: float = setting("share of the online weights a target update moves the target "
                         "weights by (1: hard copy)", minimum=0, maximum=1)


class EntropyCoeffSchedule(ClassicSetupCall):
    """`policy.entropy_coeff` (a non-trainable tf.Variable the loss reads) follows config
    `entropy_coeff_schedule` ([[t, coeff], ...]) or stays at `entropy_coeff`."""

    def _setup_mixin(self):
        setup_scheduled_coefficient(self, "entropy_coeff",
                                    EntropySettings.from_config(self.config).entropy_coeff,
                                    self.config.get("entropy_coeff_schedule"))

    def on_global_var_update(self, global_vars: Dict) -> None:
        super().on_global_var_update(global_vars)
        update_scheduled_coefficient(self, "entropy_coeff")


class KLCoeffMixin(ClassicSetupCall):
    """Adaptive KL penalty (PPO): `policy.kl_coeff` (tf.Variable) and `update_kl(sampled_kl)`.

    Config: `kl_coeff` (initial) and `kl_target` (KLSettings). Rule: if the
    measured KL exceeds 2x the target, the coefficient grows by 1.5x; if it is below half the
    target, it halves; otherwise it stays.
    """

    def _setup_mixin(self):
        settings = KLSettings.from_config(self.config)
        self.kl_coeff_val, self.kl_target = settings.kl_coeff, settings.kl_target
        self.kl_coeff = tf.Variable(self.kl_coeff_val, trainable=False, dtype=tf.float32,
                                    name="kl_coeff")
        self._extra_state_variables["kl_coeff"] = [self.kl_coeff]

    def update_kl(self, sampled_kl: float) -> float:
        """Adapt the coefficient to a measured KL; returns the new coefficient."""
        held = float(self.kl_coeff.numpy())
        current = held
        if sampled_kl > 2.0 * self.kl_target:
            current *= 1.5
        elif sampled_kl < 0.5 * self.kl_target:
            current *= 0.5
        if current != held:  # (a coefficient of 0, PPO without the penalty, is never written)
            assign_scalar(self.kl_coeff, current)
        self.kl_coeff_val = current
        return current


class ValueNetworkMixin(ClassicSetupCall):
    """`value(obs_batch, state_batches=None)` / `_value(...)`: the model's value estimates as
    numpy, used by postprocessors to bootstrap truncated or cut trajectories."""

    def value(self, obs_batch, state_batches=None) -> np.ndarray:
        """Values [B] for raw observations.

        Raises:
            NotSupportedError: if the model has no value branch.
        """
        return self.compute_values(obs_batch, state_batches)

    def _value(self, obs_batch, state_batches=None) -> np.ndarray:
        return self.value(obs_batch, state_batches)


class TargetNetworkMixin(ClassicSetupCall):
    """A target copy of the model (`policy.target_model`) and `update_target(tau=None)`.

    If the policy did not create `self.target_model` in make_model/before_init, one is built
    from the ModelCatalog with the same arguments. After loss init it is synced with a hard
    copy. `update_target(tau)` does target <- tau * model + (1 - tau) * target; tau defaults to
    config `tau` (TargetNetworkSettings). The target weights are part of get_state.
    """

    def _setup_mixin(self):
        self._target_tau = TargetNetworkSettings.from_config(self.config).tau
        if getattr(self, "target_model", None) is None:
            self.target_model = ModelCatalog.get_model(
                self.observation_space, self.action_space, self.logit_dim,
                self.config["model"], name="target_model")

    def _after_loss_init_mixin(self):
        if len(self.target_model.variables) != len(self.model.variables):
            # lazily built custom models: run the target once so its variables exist
            self.target_model({SampleBatch.OBS: tf.nest.map_structure(
                tf.constant, self.preprocessor.zeros(1))},
                [tf.constant(s[None]) for s in self.target_model.get_initial_state()], None)
        if len(self.target_model.variables) != len(self.model.variables):
            raise InvalidConfigError(
                "The target model's variables do not match the model's; build the target model "
                "with the same model config as the model.")
        self._extra_state_variables["target_model"] = list(self.target_model.variables)
        self._update_target_fn = tf.function(self._polyak_update,
                                             input_signature=[tf.TensorSpec([], tf.float32)],
                                             autograph=False)
        self.update_target(tau=1.0)

    def _polyak_update(self, tau):
        for target, source in zip(self.target_model.variables, self.model.variables):
            target.assign(tau * source + (1.0 - tau) * target)
        return tau

    def set_target_weights(self, weights) -> None:
        """Sets the target network to `weights`, given in `target_model.variables` order (as
        another policy's target model gives them, e.g. the Ape-X learner's)."""
        from tfrl.policy.tf_policy_state import assign_checked

        assign_checked(self.target_model.variables, weights, "target weights")

    def update_target(self, tau: Optional[float] = None) -> None:
        """Move target weights toward the model's (tau=1: hard copy).

        Raises:
            InvalidConfigError: if tau is outside [0, 1].
        """
        tau = float(self._target_tau if tau is None else tau)
        if not 0.0 <= tau <= 1.0:
            raise InvalidConfigError(f"tau must be in [0, 1], got {tau}.")
        self._update_target_fn(tf.constant(tau, tf.float32))


class ComputeTDErrorMixin(ClassicSetupCall):
    """`compute_td_error(...)`: per-sample TD errors from the policy's loss, without a
    gradient step (for new priorities in prioritized replay). The loss must expose them
    through extra_learn_fetches as `td_error`."""

    def compute_td_error(self, obs_t, act_t, rew_t, obs_tp1, terminateds_mask,
                         importance_weights=None, **extra_columns) -> np.ndarray:
        """TD errors [B] as numpy.

        Raises:
            NotSupportedError: if the loss does not provide `td_error`.
            InvalidBatchError: if the loss reads columns not given (pass them as keywords).
        """
        rew_t = np.asarray(rew_t, np.float32)
        weights = (np.ones_like(rew_t) if importance_weights is None
                   else np.asarray(importance_weights, np.float32))
        batch = SampleBatch({SampleBatch.OBS: obs_t, SampleBatch.ACTIONS: act_t,
                             SampleBatch.REWARDS: rew_t, SampleBatch.NEXT_OBS: obs_tp1,
                             SampleBatch.TERMINATEDS: np.asarray(terminateds_mask, bool),
                             SampleBatch.PRIO_WEIGHTS: weights, **extra_columns})
        _, _, per_sample = self._loss_fn(self._prepare_batch(batch))
        if SampleBatch.TD_ERROR not in per_sample:
            raise NotSupportedError(
                "This policy's loss does not expose 'td_error'; return it from "
                "extra_learn_fetches_fn to use compute_td_error.")
        return per_sample[SampleBatch.TD_ERROR].numpy()
