"""TFPolicy: a TensorFlow 2 policy (eager + tf.function) whose pieces are overridable methods.

build_tf_policy (tf_policy_template.py) makes subclasses whose methods call user hooks; you can
also subclass TFPolicy directly and override `loss`, `stats`, etc.

Construction order (each step may use what the previous ones built):
  1. config = get_default_config() updated with the given config (model config merged too)
  2. validate_spaces, before_init
  3. action distribution (ModelCatalog.get_action_dist) and model (`make_model`)
  4. optimizer (`make_optimizer`); mixin setup (`_setup_mixin` of every mixin class)
  5. before_loss_init
  6. loss initialisation: a dummy batch of zeros is postprocessed and the loss, stats and
     extra-learn fetches run once eagerly on it; the batch columns they read become the
     learn step's input signature (like RLlib's placeholder tracking), variables get created,
     and the optimizer's slots are built (`optimizer.build`) so that no traced step creates
     variables -- required under tf.distribute.MirroredStrategy
  7. `_after_loss_init_mixin` of every mixin (e.g. target network hard sync), after_init

Steps 6 and 7 are `LossInitialization` (loss_initialization.py); batches become the traced
calls' flat inputs in `TFPolicyInputs` (flat_inputs.py); weights, state and export are
`TFPolicyState` (tf_policy_state.py); a model's previous-action-and-reward inputs are
`PrevActionInputs` (prev_action_inputs.py): the bases of `TFPolicy`, each one role on its state.

Traced functions (input signatures leave the batch dimension open, so batch size changes do
not retrace): action computation, value computation, the learn step, the loss alone, gradient
computation and application. Acting, value estimation and the learn step are on the hot path
(once per env step, or per train batch), so they are called through `FlatCall` (flat_inputs.py): the one
concrete function of each is fetched once and called with a flat list of tensors, which skips
tf.function's per-call argument binding and signature matching (most of the cost of a call
for a small model). They are traced as written, without autograph (as RLlib's traced eager
policies are), and so is the policy's step inside the learners' loops: a loss or model that
branches or loops on tensor values uses tf.cond / tf.while_loop. Autograph conversion was
about a second of every trainer's start.

Distributed learning: construct the policy inside `strategy.scope()`; then inside
`strategy.run` call `loss_and_stats(batch)` (pure) or `compute_and_apply_gradients(batch)`.
The latter weights each replica's mean loss by its share of the global batch (local rows /
global rows, `tfrl.policy.replica_scaling`, the one rule of every gradient step) before
differentiating, because the tf_keras optimizer's `apply_gradients` in a replica context *sums*
gradients across replicas: the applied update is then the gradient of the global-batch mean,
also for an uneven split. Stats are weighted the same way; reduce them with SUM. With
`grad_clip` set, clipping acts on each replica's scaled gradients before the sum.
"""
from __future__ import annotations

import copy
import functools
import inspect
import logging
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras as keras
import tree

from tfrl.config import COMMON_CONFIG, policy_defaults
from tfrl.errors import (InvalidBatchError,
                         NotSupportedError)
from tfrl.policy.replica_scaling import scaled_gradients, weight_by_share
from tfrl.models.catalog import ModelCatalog, merge_model_config
from tfrl.policy.flat_inputs import (FlatCall, TFPolicyInputs, actions_as_numpy, actions_as_tensors,
                                     shape_template)
from tfrl.policy.loss_initialization import LossInitialization
from tfrl.policy.policy import Policy
from tfrl.policy.prev_action_inputs import PrevActionInputs
from tfrl.policy.sample_batch import SampleBatch
from tfrl.policy.tf_policy_state import TFPolicyState

logger = logging.getLogger(__name__)

# A policy declared without get_default_config (or one whose defaults leave keys out) has the
# trainer's common keys with COMMON_CONFIG's values, as it has inside a trainer that does not set
# them, and no gradient clipping.
TFPOLICY_DEFAULT_CONFIG = {**policy_defaults(COMMON_CONFIG), "model": {}, "grad_clip": None}


# learn-step stats from the model's metrics() are named "model/<name>"; the trainer's result
# reports them nested, as classic RLlib does: info/learner/<policy>/model/<name>
MODEL_METRICS_PREFIX = "model/"


class TFPolicy(LossInitialization, PrevActionInputs, TFPolicyInputs, TFPolicyState, Policy):
    """TensorFlow 2 policy; see the module docstring for the construction order."""

    preprocesses_observations = True  # raw observations, preprocessed in its traced functions

    @classmethod
    def takes_classic_observations(cls, config: Dict) -> bool:
        """A TF policy preprocesses raw observations itself, except with a classic custom model
        (model config `custom_model`): then, as in classic RLlib, its rows, postprocessing,
        callbacks and loss see the one-hot / flattened observations that classic code reads
        (one-hot `obs` rows of a Discrete space, slices of a flattened Dict's), and its model
        reads them as classic models did (catalog.py). tfrl's own models keep raw ones."""
        return merge_model_config(config.get("model"))["custom_model"] is not None

    @classmethod
    def get_default_config(cls) -> Dict:
        return copy.deepcopy(TFPOLICY_DEFAULT_CONFIG)

    def __init__(self, observation_space, action_space, config: Optional[Dict] = None):
        merged = self.get_default_config()
        merged.update(config or {})
        merged["model"] = merge_model_config(merged.get("model"))
        super().__init__(observation_space, action_space, merged)
        self.num_grad_updates = 0
        self._sample_calls = 0
        seed = merged.get("seed")
        self._seed_base = int(seed) if seed is not None else int(
            np.random.SeedSequence().entropy % (2 ** 31))
        self.validate_spaces(observation_space, action_space, merged)
        self.before_init(observation_space, action_space, merged)

        self.dist_class, self.logit_dim = ModelCatalog.get_action_dist(action_space,
                                                                       merged["model"])
        self.model = self.make_model()
        self.preprocessor = self.model.preprocessor
        self._obs_spec = self.preprocessor.input_spec()
        self._state_specs = self.model.state_specs()
        self._set_up_prev_inputs(action_space)
        self.optimizer = self.make_optimizer()
        self._extra_state_variables: Dict[str, List[tf.Variable]] = {}
        self.batch_divisibility_req = 1
        for cls in self._mixin_classes():
            if "_setup_mixin" in cls.__dict__:
                cls.__dict__["_setup_mixin"](self)
        self.before_loss_init(observation_space, action_space, merged)
        self._loss_ready = False
        self._initialize_loss()
        self._loss_ready = True
        for cls in self._mixin_classes():
            if "_after_loss_init_mixin" in cls.__dict__:
                cls.__dict__["_after_loss_init_mixin"](self)
        self.after_init(observation_space, action_space, merged)
        self.batch_divisibility_req = int(self.get_batch_divisibility_req())

    def get_session(self) -> None:
        """None: tfrl runs TensorFlow 2 eagerly, with no TF1 session (classic RLlib's eager
        answer, which `make_tf_callable(None)` takes)."""
        return None

    def _mixin_classes(self):
        return [c for c in reversed(type(self).__mro__) if c not in (TFPolicy, Policy, object)]

    # ----- overridable pieces (build_tf_policy maps hooks onto these) -----------------------
    def validate_spaces(self, observation_space, action_space, config) -> None:
        """Raise UnsupportedSpaceError for spaces this policy cannot handle (default: none)."""

    def before_init(self, observation_space, action_space, config) -> None:
        """Runs before the model is built."""

    def before_loss_init(self, observation_space, action_space, config) -> None:
        """Runs after model, optimizer and mixin setup, before the dummy loss pass."""

    def after_init(self, observation_space, action_space, config) -> None:
        """Runs at the end of construction."""

    def make_model(self):
        """The policy model (default: from the ModelCatalog and config["model"])."""
        return ModelCatalog.get_model(self.observation_space, self.action_space,
                                      self.logit_dim, self.config["model"], name="model")

    def make_optimizer(self):
        """A tf_keras optimizer (default: Adam with config["lr"])."""
        return keras.optimizers.Adam(learning_rate=self.config["lr"])

    def loss(self, model, dist_class, train_batch):
        """Scalar loss tensor for a dict of batch tensors."""
        raise NotImplementedError("Give build_tf_policy a loss_fn or override TFPolicy.loss.")

    def stats(self, train_batch) -> Dict:
        """Scalar stats tensors; may read values the loss stored on the policy."""
        return {}

    def extra_learn_fetches(self) -> Dict:
        """Per-sample tensors [B] to return from the learn step (e.g. td_error)."""
        return {}

    def gradients(self, optimizer, tape, loss):
        """list of (grad, var): default differentiates w.r.t. the model's trainable variables
        and clips by global norm when config["grad_clip"] is set."""
        variables = self.model.trainable_variables
        grads = tape.gradient(loss, variables)
        if self.config.get("grad_clip"):
            grads, _ = tf.clip_by_global_norm(grads, self.config["grad_clip"])
        return list(zip(grads, variables))

    def apply_gradients_op(self, optimizer, grads_and_vars) -> None:
        """Apply (grad, var) pairs (default: optimizer.apply_gradients)."""
        optimizer.apply_gradients([(g, v) for g, v in grads_and_vars if g is not None])

    def grad_stats(self, train_batch, grads) -> Dict:
        """Scalar stats about the gradients (default: their global norm)."""
        return {"grad_gnorm": tf.linalg.global_norm([g for g in grads if g is not None])}

    def extra_action_out(self, input_dict, state_batches, model, action_dist) -> Dict:
        """Extra per-row outputs of action computation (tensors)."""
        return {}

    def action_sampler(self, model, obs_batch, state_batches, explore, timestep, seed):
        """Return (actions, logp, state_out) to bypass the distribution, or None."""
        return None

    def action_distribution(self, model, obs_batch, state_batches, explore, timestep):
        """(dist_inputs, dist_class, state_out) (default: model outputs + catalog dist)."""
        dist_inputs, state_out = model(self.model_inputs(obs_batch), state_batches, None)
        return dist_inputs, self.dist_class, state_out

    def get_batch_divisibility_req(self) -> int:
        """Learn batches must have a multiple of this many rows (default 1)."""
        return 1

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        return sample_batch

    # ----- traced building blocks ------------------------------------------------------
    def _run_loss(self, train_batch):
        loss = self.loss(self.model, self.dist_class, train_batch)
        # classic ModelV2's hooks: the model may change the loss and report its own metrics
        loss = self.model.custom_loss(loss, train_batch)
        if isinstance(loss, tf.Tensor) and loss.shape.rank not in (0, None):
            # a loss of several values (a per-row term left unreduced): classic RLlib's TF1
            # optimizers minimised it through the gradients of its sum
            loss = tf.reduce_sum(loss)
        stats = dict(self.stats(train_batch))
        per_sample = dict(self.extra_learn_fetches())
        stats.setdefault("total_loss", loss)
        for name, value in (self.model.metrics() or {}).items():
            stats[f"{MODEL_METRICS_PREFIX}{name}"] = tf.cast(value, tf.float32)
        return loss, stats, per_sample

    def loss_and_stats(self, batch: Dict[str, tf.Tensor]):
        """(loss scalar, stats dict of scalars, per_sample dict of [B] tensors).

        Pure apart from values the loss stores on the policy; traceable and safe inside
        `strategy.run` on a per-replica batch holding the columns in `loss_input_signature`.
        """
        return self._run_loss(batch)

    def compute_and_apply_gradients(self, batch: Dict[str, tf.Tensor]):
        """One optimizer step on a dict of batch tensors; returns (stats, per_sample).

        Callable eagerly, inside tf.function, and inside `strategy.run` on each replica's own
        rows. The gradients are weighted by the replica's share of the global batch
        (`tfrl.policy.replica_scaling`, the rule of every learner), and so are the stats:
        reduce them over replicas with SUM to get global-batch means (on one device the share
        is 1 and nothing changes).

        Raises:
          NotSupportedError: called in a strategy's cross-replica context (outside
            `strategy.run` but inside `strategy.scope()`).
        """
        step = scaled_gradients(self, batch, self._run_loss)
        stats = dict(step.stats)
        stats.update(self.grad_stats(batch, [g for g, _ in step.grads_and_vars]))
        self.apply_gradients_op(self.optimizer, step.grads_and_vars)
        return weight_by_share(stats, step.share), step.per_sample

    def _forward_actions(self, obs, states, explore, timestep, seed, prev=()):
        """(actions, state_out, extras dict) for raw obs tensors (and `prev`, the previous
        [actions, rewards] for a model that reads them); traced."""
        with self._acting_on(prev):  # the hooks' `model_inputs` finds `prev`
            return self._forward_actions_with_inputs(obs, states, explore, timestep, seed)

    def _forward_actions_with_inputs(self, obs, states, explore, timestep, seed):
        sampled = self.action_sampler(self.model, obs, states, explore, timestep, seed)
        extras = {}
        if sampled is not None:
            actions, logp, state_out = sampled
            if logp is not None:
                extras[SampleBatch.ACTION_LOGP] = logp
            dist = None
        else:
            dist_inputs, dist_class, state_out = self.action_distribution(
                self.model, obs, states, explore, timestep)
            dist = dist_class(dist_inputs, self.model)
            sample = functools.partial(dist.sample, seed=seed) if _takes_seed(dist.sample) else dist.sample
            if isinstance(explore, bool):
                actions = sample() if explore else dist.deterministic_sample()
            else:
                actions = tf.cond(explore, sample, dist.deterministic_sample)
            extras[SampleBatch.ACTION_LOGP] = dist.logp(actions)
            extras[SampleBatch.ACTION_DIST_INPUTS] = dist_inputs
        extras.update(self._value_and_extra_outputs(obs, states, dist))
        return actions, list(state_out), extras

    def extra_outputs_are_standard(self) -> bool:
        """Whether this policy's extra outputs of acting are TFPolicy's own: the distribution
        inputs, the log-likelihood and the model's value prediction, nothing of a subclass's
        (a numpy copy of the policy can then compute them; see NumpyActor)."""
        cls = type(self)
        return self.model.has_value_branch and all(
            getattr(cls, name) is getattr(TFPolicy, name)
            for name in ("extra_action_out", "_value_and_extra_outputs",
                         "compute_outputs_of_actions"))

    def _value_and_extra_outputs(self, obs, states, dist) -> Dict:
        """vf_preds (where the model has a value branch) and `extra_action_out`, after the model
        ran on `obs`; traced."""
        extras = {}
        if self.model.has_value_branch:
            extras[SampleBatch.VF_PREDS] = self.model.value_function()
        extras.update(self.extra_action_out({SampleBatch.OBS: obs}, states, self.model, dist))
        return extras

    def _build_action_functions(self):
        scalar_bool = tf.TensorSpec([], tf.bool)
        scalar_int = tf.TensorSpec([], tf.int64)
        seed_spec = tf.TensorSpec([2], tf.int32)
        # the previous [actions, rewards] come last, for a model that reads them only
        prev = [self._prev_specs] if self._prev_specs else []
        self._actions_signature = [self._obs_spec, self._state_specs, scalar_bool, scalar_int,
                                   seed_spec] + prev
        self.compile_actions_with_xla(self.config.get("jit_compile_actions") is True)

        def value_fn(obs, states, prev=()):
            with self._acting_on(prev):
                self.model(self.model_inputs(obs), states, None)
            return self.model.value_function()

        self._value_fn = tf.function(value_fn, input_signature=[self._obs_spec,
                                                                self._state_specs] + prev,
                                     autograph=False)
        self._flat_values = FlatCall(self._value_fn)
        flat_obs_specs = tf.nest.flatten(self._obs_spec)
        self._obs_is_nested = tf.nest.is_nested(self._obs_spec)
        self._obs_leaves = [(s.dtype.as_numpy_dtype, shape_template(s), "The observation batch")
                            for s in flat_obs_specs]
        self._state_leaves = [(s.dtype.as_numpy_dtype, shape_template(s), "A recurrent state batch")
                              for s in self._state_specs]
        # explore is one of two values: make its tensors once instead of on every call
        self._explore_tensors = {False: tf.constant(False), True: tf.constant(True)}

    def _build_learn_functions(self):
        sig = [self._learn_signature]
        self._learn_fn = tf.function(self.compute_and_apply_gradients, input_signature=sig,
                                     autograph=False)
        self._loss_fn = tf.function(self.loss_and_stats, input_signature=sig, autograph=False)

        def grads_fn(batch):
            with tf.GradientTape() as tape:
                loss, stats, _ = self._run_loss(batch)
            grads_and_vars = self.gradients(self.optimizer, tape, loss)
            grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                     for g, v in grads_and_vars]
            stats.update(self.grad_stats(batch, grads))
            return grads, stats

        self._grads_fn = tf.function(grads_fn, input_signature=sig, autograph=False)
        self._flat_learn = FlatCall(self._learn_fn)
        self._flat_grads = FlatCall(self._grads_fn)
        self._learn_leaves = [(s.dtype.as_numpy_dtype, shape_template(s), f"Column {k!r}")
                              for k in sorted(self._learn_signature)
                              for s in tf.nest.flatten(self._learn_signature[k])]
        variables = self.model.trainable_variables
        self._apply_fn = tf.function(
            lambda grads: self.apply_gradients_op(self.optimizer, list(zip(grads, variables))),
            input_signature=[[tf.TensorSpec(v.shape, v.dtype) for v in variables]],
            autograph=False)

    def compile_actions_with_xla(self, enabled: bool) -> None:
        """Whether `compute_actions` runs an XLA-compiled function (`jit_compile`) or the plain
        graph. XLA compiles once per batch size (a fraction of a second for a small network);
        with one TensorFlow thread it then takes about a third of the graph's time per call,
        which is what a rollout worker stepping a fixed number of envs wants. If XLA cannot
        compile the policy (an op it does not support), the first call logs a warning and the
        policy acts with the plain graph from then on."""
        self._compute_actions_fn = tf.function(self._forward_actions,
                                               input_signature=self._actions_signature,
                                               jit_compile=bool(enabled) or None,
                                               autograph=False)
        self._flat_actions = FlatCall(self._compute_actions_fn)
        self._actions_with_xla = bool(enabled)
        self._actions_called = False

    @property
    def actions_compiled_with_xla(self) -> bool:
        """True when `compute_actions` runs the XLA-compiled action function."""
        return self._actions_with_xla

    def _call_actions(self, flat_inputs: list):
        if self._actions_called:
            return self._flat_actions(flat_inputs)
        try:
            outputs = self._flat_actions(flat_inputs)
        except tf.errors.OpError as exc:
            if not self._actions_with_xla:
                raise
            logger.warning("%s: XLA could not compile the action function (%s: %s); acting "
                           "with the plain graph instead", type(self).__name__,
                           type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            self.compile_actions_with_xla(False)
            outputs = self._flat_actions(flat_inputs)
        self._actions_called = True
        return outputs

    @property
    def observation_spec(self):
        """TensorSpec (nest) of one batch of raw observations (batch dimension open), as the
        preprocessor takes them: the serving signature's observation inputs."""
        return self._obs_spec

    @property
    def state_specs(self) -> List[tf.TensorSpec]:
        """TensorSpecs of the recurrent state inputs (empty for a feed-forward model)."""
        return list(self._state_specs)

    @property
    def loss_input_signature(self) -> Dict:
        """TensorSpecs of the columns the loss reads (batch dimension open)."""
        return dict(self._learn_signature)

    # ----- acting ----------------------------------------------------------------------
    def _next_seed(self) -> np.ndarray:
        self._sample_calls += 1
        return np.array([self._seed_base, self._sample_calls % (2 ** 31)], np.int32)

    def _compute_actions_eager(self, obs, states):
        actions, state_out, extras = self._forward_actions(
            tree.map_structure(tf.constant, obs), [tf.constant(s) for s in states],
            tf.constant(True), tf.constant(0, tf.int64), tf.constant(self._next_seed()))
        return (actions_as_numpy(actions), [s.numpy() for s in state_out],
                {k: v.numpy() for k, v in extras.items()})

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs):
        """(actions, state_outs, extra_fetches) as numpy for a batch of raw observations.

        `obs_batch` is an array [B, ...] (or a structure of arrays for Dict/Tuple spaces, or a
        list of single observations). extra_fetches holds action_logp and action_dist_inputs
        (and vf_preds if the model has a value branch, plus extra_action_out). Actions are not
        clipped to the action space. prev_action_batch / prev_reward_batch are read by a
        model that reads them (model config `lstm_use_prev_action_reward`): a batch of actions
        of the action space and rewards [B]; zeros where not given. Other models ignore them.

        Raises:
            InvalidBatchError: if the observations (or states) do not have the shapes of the
                policy's spaces with a leading batch dimension.
        """
        explore = self.config["explore"] if explore is None else bool(explore)
        obs = self._obs_tensors(obs_batch)
        batch_size = int(obs[0].shape[0])
        states = self._state_tensors(state_batches, batch_size)
        timestep = self.global_timestep if timestep is None else int(timestep)
        prev = self._prev_tensors(prev_action_batch, prev_reward_batch, batch_size)
        actions, state_out, extras = self._call_actions(
            obs + states + [self._explore_tensors[explore], tf.constant(timestep, tf.int64),
                            tf.constant(self._next_seed())] + prev)
        self.global_timestep += batch_size
        return (actions_as_numpy(actions), [s.numpy() for s in state_out],
                {k: v.numpy() for k, v in extras.items()})

    def compute_values(self, obs_batch, state_batches=None, prev_action_batch=None,
                       prev_reward_batch=None) -> np.ndarray:
        """Value estimates [B] for raw observations (and recurrent state, and the previous
        actions and rewards as `compute_actions` takes them).

        Raises:
            NotSupportedError: if the model has no value branch.
            InvalidBatchError: if the observations (or states) have the wrong shapes.
        """
        if not self.model.has_value_branch:
            raise NotSupportedError(
                f"The model {type(self.model).__name__} has no value branch, so this policy "
                "cannot estimate values; use a model with value_function().")
        obs = self._obs_tensors(obs_batch)
        batch_size = int(obs[0].shape[0])
        states = self._state_tensors(state_batches, batch_size)
        prev = self._prev_tensors(prev_action_batch, prev_reward_batch, batch_size)
        return self._flat_values(obs + states + prev).numpy()

    def _check_likelihoods_supported(self) -> None:
        if self._state_specs:
            raise NotSupportedError(
                "the likelihoods of given actions under a recurrent policy need the recorded "
                "states; they are supported for feed-forward policies only")
        if type(self).action_sampler is not TFPolicy.action_sampler:
            raise NotSupportedError(
                f"{type(self).__name__} chooses actions without a distribution "
                "(action_sampler_fn), so it has no action likelihoods to compare")

    def compute_log_likelihoods(self, actions, obs_batch) -> np.ndarray:
        """log pi(actions | obs) [B] under the policy's action distribution (what off-policy
        estimators compare with the recorded behaviour probabilities).

        Raises:
            NotSupportedError: a recurrent policy, or one whose actions bypass a distribution
                (an `action_sampler_fn`, e.g. DQN's epsilon-greedy).
            InvalidBatchError: if the observations have the wrong shapes.
        """
        self._check_likelihoods_supported()
        obs = tf.nest.pack_sequence_as(self._obs_spec, self._obs_tensors(obs_batch))
        if getattr(self, "_log_likelihoods_fn", None) is None:
            def log_likelihoods(obs, actions):
                dist_inputs, dist_class, _ = self.action_distribution(
                    self.model, obs, [], tf.constant(False), tf.constant(0, tf.int64))
                return dist_class(dist_inputs, self.model).logp(actions)

            # traced once per batch size and dtype (off-policy estimators and logged actions of
            # an ExternalEnv call it per batch); eagerly it took about 16 ms a call
            self._log_likelihoods_fn = tf.function(log_likelihoods, autograph=False,
                                                   reduce_retracing=True)
        return self._log_likelihoods_fn(obs, actions_as_tensors(actions)).numpy()

    def compute_outputs_of_actions(self, obs_batch, actions, explore=None,
                                   timestep=None) -> tuple:
        """(actions, extra_fetches) as `compute_actions` would give them had it chosen
        `actions` (an application's logged actions, or draws of the policy's numpy copy), in
        one call: the observations' extra outputs (action_dist_inputs, vf_preds,
        extra_action_out) with action_logp (and action_prob) of the given actions, which come
        back in the dtype of the policy's own actions.

        Raises:
            NotSupportedError: as compute_log_likelihoods (a recurrent policy, or one that
                chooses actions without a distribution).
            InvalidBatchError: if the observations have the wrong shapes.
        """
        self._check_likelihoods_supported()
        explore = self.config["explore"] if explore is None else bool(explore)
        flat_obs = self._obs_tensors(obs_batch)
        if getattr(self, "_outputs_of_actions_fn", None) is None:
            def outputs_of_actions(obs, actions, explore, timestep):
                dist_inputs, dist_class, _ = self.action_distribution(
                    self.model, obs, [], explore, timestep)
                dist = dist_class(dist_inputs, self.model)
                actions = tree.map_structure(lambda a, own: tf.cast(a, own.dtype), actions,
                                             dist.deterministic_sample())
                extras = {SampleBatch.ACTION_DIST_INPUTS: dist_inputs}
                extras.update(self._value_and_extra_outputs(obs, [], dist))
                extras[SampleBatch.ACTION_LOGP] = logp = dist.logp(actions)
                if SampleBatch.ACTION_PROB in extras:
                    extras[SampleBatch.ACTION_PROB] = tf.exp(logp)
                return actions, extras

            self._outputs_of_actions_fn = tf.function(outputs_of_actions, autograph=False,
                                                      reduce_retracing=True)
        timestep = self.global_timestep if timestep is None else int(timestep)
        actions, extras = self._outputs_of_actions_fn(
            tf.nest.pack_sequence_as(self._obs_spec, flat_obs), actions_as_tensors(actions),
            self._explore_tensors[explore], tf.constant(timestep, tf.int64))
        self.global_timestep += int(flat_obs[0].shape[0])
        return actions_as_numpy(actions), {k: v.numpy() for k, v in extras.items()}

    def get_initial_state(self):
        return self.model.get_initial_state()

    # ----- learning --------------------------------------------------------------------

    def learn_on_batch(self, samples: SampleBatch) -> Dict:
        """One gradient step; returns stats as numpy floats plus per-sample arrays (e.g.
        td_error) under their own names.

        Raises:
            InvalidBatchError: if the batch lacks a column the loss reads, or a column's shape
                does not fit the loss's input signature.
        """
        stats, per_sample = self._flat_learn(self._learn_tensors(samples))
        self.num_grad_updates += 1
        out = {k: float(v.numpy()) for k, v in stats.items()}
        out.update({k: v.numpy() for k, v in per_sample.items()})
        return out

    def compute_gradients(self, samples: SampleBatch):
        """(list of numpy gradients, stats) without applying them.

        Raises:
            InvalidBatchError: if the batch lacks a column the loss reads, or a column's shape
                does not fit the loss's input signature.
        """
        grads, stats = self._flat_grads(self._learn_tensors(samples))
        return [g.numpy() for g in grads], {k: float(v.numpy()) for k, v in stats.items()}

    def apply_gradients(self, gradients) -> None:
        """Apply gradients from `compute_gradients` (same variable order).

        Raises:
            InvalidBatchError: if the number or shapes of the gradients do not match.
        """
        variables = self.model.trainable_variables
        if len(gradients) != len(variables) or any(
                tuple(np.shape(g)) != tuple(v.shape) for g, v in zip(gradients, variables)):
            raise InvalidBatchError(
                "Gradients do not match this policy's trainable variables; pass the list "
                "returned by compute_gradients of a policy with the same model config.")
        self._apply_fn([np.asarray(g, v.dtype.as_numpy_dtype)
                        for g, v in zip(gradients, variables)])
        self.num_grad_updates += 1


def _takes_seed(sample) -> bool:
    """Whether a distribution's `sample` takes tfrl's `seed` (a classic RLlib distribution's
    `sample()` takes nothing, and draws from TensorFlow's global generator)."""
    try:
        parameters = inspect.signature(sample).parameters
    except (TypeError, ValueError):
        return True
    return "seed" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
