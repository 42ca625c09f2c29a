"""DQNTFPolicy: deep Q-learning declared with build_tf_policy.

This is an algorithm's policy. Acting is epsilon-greedy over the Q-network
(`sample_epsilon_greedy`, epsilon from a LinearSchedule of the global timestep; explore=False
and the exported SavedModel act greedily). Rollout workers rewrite trajectories into n-step
transitions (`postprocess_nstep_and_prio`, per episode piece) and, for Ape-X, rate them
(`add_worker_priorities`, once per sampled fragment). The learner minimises `build_q_losses`:

    target   = R_n + gamma**k * (1 - terminated) * Q_target(s', argmax_a Q(s', a))   (double Q)
               R_n + gamma**k * (1 - terminated) * max_a Q_target(s', a)             (plain)
               clipped to `q_target_bounds` where set
    td_error = Q(s, a) - target
    loss     = mean(importance_weight * huber(td_error))      (td_error_loss_fn "huber")
               mean(importance_weight * td_error**2 / 2)      (td_error_loss_fn "mse")

where k <= n_step is the number of rewards summed into R_n (shorter at episode ends). Only a
*terminated* transition has no bootstrap; a truncated one bootstraps from s'. Per-sample
`td_error` is returned from every learn step for priority updates. The target network
(TargetNetworkMixin) is refreshed by the trainer (dqn.py).

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import copy
import functools
from typing import Dict, Optional

import gymnasium as gym
import tensorflow as tf
import tf_keras as keras
import tree

from tfrl.agents.dqn.config import DEFAULT_CONFIG
from tfrl.agents.dqn.distributional_q_model import (DenseDistributionalQModel,
                                                    DistributionalQTFModel, feature_size)
from tfrl.agents.dqn.dqn_model import QNetwork
from tfrl.agents.dqn.numpy_q_policy import NumpyQPolicySpec, rate_transitions
from tfrl.config import policy_defaults
from tfrl.errors import InvalidConfigError, UnsupportedSpaceError
from tfrl.models.catalog import ModelCatalog
from tfrl.policy.numpy_policy import dense_layer_indices, is_flat_box, postprocess_hooks
from tfrl.policy import (ComputeTDErrorMixin, LearningRateSchedule, SampleBatch,
                         TargetNetworkMixin, build_tf_policy)
from tfrl.policy.replay_targets import (compute_q_targets, postprocess_nstep_and_prio, q_value_stats,
                                         td_error_fetches)
from tfrl.utils.schedules import epsilon_schedule_from_config
from tfrl.utils.tf_ops import assign_scalar


def numpy_q_policy_spec(policy) -> Optional[NumpyQPolicySpec]:
    """The NumpyQPolicySpec of a built DQN `policy`, or None when the numpy copy would not be
    exact: another action sampler, model, loss or postprocessing than DQNTFPolicy's, a
    hand-written subclass, image or non-flat observations."""
    from ray import cloudpickle  # Ray's import is heavy; a policy built outside Ray never pays it

    cls = type(policy)
    reference = DQNTFPolicy
    if not all("_build_kwargs" in c.__dict__ or c in reference.__mro__ for c in cls.__mro__):
        return None
    declared = next(c for c in cls.__mro__ if "_build_kwargs" in c.__dict__)._build_kwargs  # noqa: SLF001
    expected = {"action_sampler_fn": sample_epsilon_greedy,
                "make_model": build_q_models, "loss_fn": build_q_losses,
                "extra_action_out_fn": None, "extra_action_fetches_fn": None,
                "action_distribution_fn": None}
    if any(declared.get(key) is not value for key, value in expected.items()):
        return None
    hooks = postprocess_hooks(cls)
    if hooks != {"postprocess_fn": postprocess_nstep_and_prio,
                 "postprocess_fragment_fn": add_worker_priorities}:
        return None
    model = policy.model
    if (type(model) is not QNetwork or not is_flat_box(policy.observation_space)
            or not isinstance(policy.action_space, gym.spaces.Discrete)):
        return None
    config = policy.config
    variables = policy.model_variables
    trunk = dense_layer_indices(model.base_model, variables,
                                [f"fc_{i}" for i in range(len(model.model_config["fcnet_hiddens"]))])
    hidden = range(len(config["hiddens"]))
    if model.dueling:
        head = dense_layer_indices(model.base_model, variables,
                                   [f"advantage_hidden_{i}" for i in hidden] + ["advantage_out"])
        value = dense_layer_indices(model.base_model, variables,
                                    [f"value_hidden_{i}" for i in hidden] + ["value_out"])
    else:
        head = dense_layer_indices(model.base_model, variables,
                                   [f"q_hidden_{i}" for i in hidden] + ["q_out"])
        value = ()
    names = [v.name.split(":")[0] for v in variables]
    target_names = [v.name.split(":")[0] for v in policy.target_model.variables]
    if None in (trunk, head, value) or sorted(names) != sorted(target_names) \
            or len(set(names)) != len(names):
        return None
    return NumpyQPolicySpec(
        class_name=cls.__qualname__, pickled_policy_class=cloudpickle.dumps(cls),
        default_config=copy.deepcopy(cls.get_default_config()),
        initial_weights=tuple(policy.get_weights()), postprocess_fn=postprocess_nstep_and_prio,
        postprocess_fragment_fn=None, trunk_layers=trunk, head_layers=head, value_layers=value,
        target_order=tuple(names.index(name) for name in target_names))


class EpsilonGreedyExploration:
    """Keeps `policy.cur_epsilon` (a variable the traced action sampler reads) equal to the
    epsilon schedule at the timestep actions are computed for, and makes export greedy.
    Remote rollout workers of DQNTFPolicy act with its numpy stand-in (numpy_q_policy.py).

    Config: `exploration_config` {initial_epsilon, final_epsilon, epsilon_timesteps}.
    """

    numpy_spec_fn = staticmethod(numpy_q_policy_spec)  # read by tfrl.policy.numpy_policy

    def _setup_mixin(self):
        self.epsilon_schedule = epsilon_schedule_from_config(self.config["exploration_config"])
        self._epsilon_value = self.epsilon_schedule.value(self.global_timestep)
        self.cur_epsilon = tf.Variable(self._epsilon_value, trainable=False, dtype=tf.float32,
                                       name="epsilon")
        self.serving_greedy = False

    def _sync_epsilon(self, timestep: int) -> None:
        value = self.epsilon_schedule.value(timestep)
        if value != self._epsilon_value:  # skip the variable write when nothing changed
            self._epsilon_value = value
            assign_scalar(self.cur_epsilon, value)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs):
        self._sync_epsilon(self.global_timestep if timestep is None else int(timestep))
        return super().compute_actions(obs_batch, state_batches, prev_action_batch,
                                       prev_reward_batch, explore=explore, timestep=timestep,
                                       **kwargs)

    def on_global_var_update(self, global_vars: Dict) -> None:
        super().on_global_var_update(global_vars)
        self._sync_epsilon(self.global_timestep)

    def set_epsilon_schedule(self, schedule) -> None:
        """Replaces the epsilon schedule (e.g. Ape-X's constant per-worker epsilon), in effect
        from the next computed action."""
        self.epsilon_schedule = schedule
        self._sync_epsilon(self.global_timestep)

    def export_model(self, export_dir: str, **serving_options) -> None:
        """Write the serving SavedModel; its "actions" are greedy (no exploration).
        `serving_options` are TFPolicy.export_model's (observation_filter, clip_actions, ...)."""
        self.serving_greedy = True
        try:
            super().export_model(export_dir, **serving_options)
        finally:
            self.serving_greedy = False


def validate_discrete_actions(policy, observation_space, action_space, config):
    """Refuses what DQN cannot act in.

    Raises:
        UnsupportedSpaceError: the action space is not Discrete.
        InvalidConfigError: the model config asks for an LSTM.
    """
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UnsupportedSpaceError(
            f"DQN needs a Discrete action space, got {action_space}; use PPO or A2C for other "
            "action spaces.")
    if config["model"].get("use_lstm"):
        raise InvalidConfigError("DQN does not support recurrent models; set model use_lstm "
                                 "False.")


def build_q_models(policy, observation_space, action_space, config):
    """The online Q-network (returned) and its target copy (policy.target_model).

    A `custom_model` subclassing DistributionalQTFModel returns features and gets classic
    DQN's heads (`hiddens`, `dueling`, `num_atoms`, `noisy`, `v_min`/`v_max`, `sigma0`, given
    to it as keywords); any other `custom_model` is used for both networks and must output one
    Q-value per action. Without a custom model: QNetwork with the config's `dueling` and
    `hiddens`, or DenseDistributionalQModel when `num_atoms` > 1 or `noisy` is set.

    Raises:
        UnknownModelError, InvalidConfigError: from the ModelCatalog, for a bad custom_model.
    """
    num_actions = int(action_space.n)
    custom = config["model"].get("custom_model")
    custom_cls = ModelCatalog.custom_model_class(custom) if custom else None
    q_options = {"q_hiddens": list(config["hiddens"]), "dueling": bool(config["dueling"]),
                 "num_atoms": int(config["num_atoms"]), "use_noisy": bool(config["noisy"]),
                 "v_min": float(config["v_min"]), "v_max": float(config["v_max"]),
                 "sigma0": float(config["sigma0"])}
    if custom_cls is not None and issubclass(custom_cls, DistributionalQTFModel):
        outputs = feature_size(config["model"], config["hiddens"], num_actions,
                               q_options["num_atoms"])

        def make(name):
            return ModelCatalog.get_model(observation_space, action_space, outputs,
                                          config["model"], name, **q_options)
    elif custom_cls is not None:
        if q_options["num_atoms"] > 1 or q_options["use_noisy"]:
            raise InvalidConfigError(
                "num_atoms > 1 and noisy need DQN's heads: make the custom model a subclass of "
                "DistributionalQTFModel (tfrl.rllib.agents.dqn.distributional_q_tf_model) "
                "whose forward returns features.")

        def make(name):
            return ModelCatalog.get_model(observation_space, action_space, num_actions,
                                          config["model"], name=name)
    elif q_options["num_atoms"] > 1 or q_options["use_noisy"]:
        hiddens = list(config["model"].get("fcnet_hiddens") or [])
        outputs = (hiddens[-1] if hiddens
                   else ModelCatalog.get_preprocessor(observation_space).size)
        if not config["hiddens"]:
            outputs = num_actions * q_options["num_atoms"]
            if hiddens:
                config = dict(config, model=dict(config["model"],
                                                 fcnet_hiddens=hiddens[:-1] + [outputs]))

        def make(name):
            return DenseDistributionalQModel(observation_space, action_space, outputs,
                                             config["model"], name, **q_options)
    else:
        def make(name):
            return QNetwork(observation_space, action_space, num_actions, config["model"],
                            name=name, dueling=config["dueling"], hiddens=config["hiddens"])
    policy.target_model = make("target_q_network")
    return make("q_network")


def q_values_and_logits(model, obs):
    """(Q-values [B, num_actions], support logits [B, num_actions, num_atoms] or None) of
    `model` for raw observations: through the heads of a DistributionalQTFModel, else the
    model's outputs are the Q-values."""
    outputs, _ = model({SampleBatch.OBS: obs})
    if isinstance(model, DistributionalQTFModel):
        return model.q_values_and_logits(outputs)
    return outputs, None


def sample_epsilon_greedy(policy, model, obs_batch, state_batches, explore, timestep, seed):
    """Greedy actions, each replaced by a uniform random one with probability epsilon when
    exploring. Returns (actions int64 [B], None, state_out)."""
    if isinstance(model, DistributionalQTFModel):
        features, state_out = model({SampleBatch.OBS: obs_batch}, state_batches, None)
        q_values, _ = model.q_values_and_logits(features)
    else:
        q_values, state_out = model({SampleBatch.OBS: obs_batch}, state_batches, None)
    policy.q_values = q_values  # what a classic extra_action_fetches_fn reads
    greedy = tf.argmax(q_values, axis=1, output_type=tf.int64)
    if policy.serving_greedy:
        return greedy, None, state_out
    batch_size = tf.shape(q_values)[0]
    num_actions = tf.cast(tf.shape(q_values)[1], tf.int64)
    if seed is None:
        coin = tf.random.uniform([batch_size])
        random_actions = tf.random.uniform([batch_size], 0, num_actions, dtype=tf.int64)
    else:
        seeds = tf.random.experimental.stateless_split(seed, num=2)
        coin = tf.random.stateless_uniform([batch_size], seed=seeds[0])
        random_actions = tf.random.stateless_uniform([batch_size], seed=seeds[1], minval=0,
                                                     maxval=num_actions, dtype=tf.int64)
    epsilon = policy.cur_epsilon * tf.cast(explore, tf.float32)
    return tf.where(coin < epsilon, random_actions, greedy), None, state_out


def add_worker_priorities(policy, batch):
    """With `worker_side_prioritization` (Ape-X) the worker rates its own transitions: a
    `priorities` column |td_error| + prioritized_replay_eps from its current online and target
    networks, which becomes each replay item's initial priority (`rate_transitions`). A fragment
    hook (`postprocess_fragment_fn`): one TD-error call for the whole fragment, whose n-step
    columns `postprocess_nstep_and_prio` made piece by piece."""
    # the loss is usable only once initialised
    if (policy.config.get("worker_side_prioritization") and policy.loss_input_signature
            and batch.count):
        return rate_transitions(policy, batch)
    return batch


def huber_loss(x, delta: float = 1.0):
    """0.5 x^2 for |x| <= delta, delta * (|x| - 0.5 delta) beyond."""
    abs_x = tf.abs(x)
    return tf.where(abs_x <= delta, 0.5 * tf.square(x), delta * (abs_x - 0.5 * delta))


def _distributional_q_loss(policy, train_batch, q_t, logits_t, q_tp1_select,
                           logits_tp1_target):
    """Distributional DQN (C51, Bellemare et al. 2017): the target network's return
    distribution of the next state's best action (chosen by `q_tp1_select`), shifted by the
    n-step rewards and discounted, is projected onto the support, and the loss is its cross
    entropy with the predicted distribution of the taken action (importance-weighted); that
    cross entropy is also each row's td_error for the replay priorities."""
    config = policy.config
    model = policy.model
    support = model.support
    num_atoms = int(model.num_atoms)
    num_actions = int(policy.action_space.n)
    v_min, v_max = model.v_min, model.v_max
    actions = tf.cast(train_batch[SampleBatch.ACTIONS], tf.int32)
    rewards = train_batch[SampleBatch.REWARDS]
    n_steps = (train_batch[SampleBatch.N_STEPS] if SampleBatch.N_STEPS in train_batch
               else tf.ones_like(rewards))
    weights = (train_batch[SampleBatch.PRIO_WEIGHTS] if SampleBatch.PRIO_WEIGHTS in train_batch
               else tf.ones_like(rewards))
    best_next = tf.one_hot(tf.argmax(q_tp1_select, axis=1, output_type=tf.int32), num_actions)
    probs_tp1_best = tf.reduce_sum(tf.nn.softmax(logits_tp1_target)
                                   * tf.expand_dims(best_next, -1), axis=1)  # [B, atoms]
    discount = tf.pow(tf.cast(config["gamma"], tf.float32), tf.cast(n_steps, tf.float32))
    not_terminated = 1.0 - tf.cast(train_batch[SampleBatch.TERMINATEDS], tf.float32)
    shifted = (tf.expand_dims(rewards, -1)
               + tf.expand_dims(discount * not_terminated, -1) * tf.expand_dims(support, 0))
    position = (tf.clip_by_value(shifted, v_min, v_max) - v_min) / ((v_max - v_min)
                                                                    / (num_atoms - 1))
    lower, upper = tf.floor(position), tf.math.ceil(position)
    same = tf.cast(upper - lower < 0.5, tf.float32)  # a target exactly on an atom
    # each target atom's probability split between its two neighbouring support atoms
    to_lower = probs_tp1_best * (upper - position + same)
    to_upper = probs_tp1_best * (position - lower)
    projected = (tf.reduce_sum(tf.one_hot(tf.cast(lower, tf.int32), num_atoms)
                               * tf.expand_dims(to_lower, -1), axis=1)
                 + tf.reduce_sum(tf.one_hot(tf.cast(upper, tf.int32), num_atoms)
                                 * tf.expand_dims(to_upper, -1), axis=1))
    logits_taken = tf.reduce_sum(logits_t * tf.expand_dims(tf.one_hot(actions, num_actions), -1),
                                 axis=1)
    cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.stop_gradient(projected), logits=logits_taken)
    policy.td_error = cross_entropy
    policy.q_t = q_t
    policy.q_loss = tf.reduce_mean(weights * cross_entropy)
    return policy.q_loss


def build_q_losses(policy, model, dist_class, train_batch):
    """The importance-weighted Huber or squared TD loss of the module docstring (the
    distributional loss with num_atoms > 1); stores q_t and td_error on the policy for the
    stats and the per-sample fetches."""
    config = policy.config
    obs = train_batch[SampleBatch.OBS]
    new_obs = train_batch[SampleBatch.NEXT_OBS]
    if config["double_q"]:
        # one forward pass of the online network over s and s'
        both = tree.map_structure(lambda a, b: tf.concat([a, b], axis=0), obs, new_obs)
        q_both, logits_both = q_values_and_logits(model, both)
        rows = tf.shape(tree.flatten(obs)[0])[0]
        q_t, q_tp1_online = q_both[:rows], q_both[rows:]
        logits_t = None if logits_both is None else logits_both[:rows]
    else:
        q_t, logits_t = q_values_and_logits(model, obs)
    q_tp1_target, logits_tp1_target = q_values_and_logits(policy.target_model, new_obs)
    if logits_t is not None:
        return _distributional_q_loss(policy, train_batch, q_t, logits_t,
                                      q_tp1_online if config["double_q"] else q_tp1_target,
                                      logits_tp1_target)

    num_actions = int(policy.action_space.n)
    actions = tf.cast(train_batch[SampleBatch.ACTIONS], tf.int32)
    q_t_selected = tf.reduce_sum(q_t * tf.one_hot(actions, num_actions), axis=1)
    best_next = tf.argmax(q_tp1_online if config["double_q"] else q_tp1_target, axis=1,
                          output_type=tf.int32)
    q_tp1_best = tf.reduce_sum(q_tp1_target * tf.one_hot(best_next, num_actions), axis=1)
    # without postprocess_nstep_and_prio (e.g. classic SimpleQ declares no postprocessor) each
    # row is a 1-step transition of weight 1
    rewards = train_batch[SampleBatch.REWARDS]
    n_steps = (train_batch[SampleBatch.N_STEPS] if SampleBatch.N_STEPS in train_batch
               else tf.ones_like(rewards))
    weights = (train_batch[SampleBatch.PRIO_WEIGHTS] if SampleBatch.PRIO_WEIGHTS in train_batch
               else tf.ones_like(rewards))
    targets = compute_q_targets(rewards, train_batch[SampleBatch.TERMINATEDS], n_steps,
                                q_tp1_best, config["gamma"])
    if config.get("q_target_bounds") is not None:
        low, high = config["q_target_bounds"]
        targets = tf.clip_by_value(targets, float(low), float(high))
    policy.td_error = q_t_selected - tf.stop_gradient(targets)
    policy.q_t = q_t
    per_row = (0.5 * tf.square(policy.td_error) if config.get("td_error_loss_fn") == "mse"
               else huber_loss(policy.td_error))
    policy.q_loss = tf.reduce_mean(weights * per_row)
    return policy.q_loss


def make_adam(policy, config):
    return keras.optimizers.Adam(learning_rate=config["lr"], epsilon=config["adam_epsilon"])


def q_loss_stats(policy, train_batch):
    return {**q_value_stats(policy), "cur_lr": tf.cast(policy.optimizer.learning_rate, tf.float32)}


DQNTFPolicy = build_tf_policy(
    "DQNTFPolicy",
    loss_fn=build_q_losses,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    validate_spaces=validate_discrete_actions,
    make_model=build_q_models,
    action_sampler_fn=sample_epsilon_greedy,
    postprocess_fn=postprocess_nstep_and_prio,
    postprocess_fragment_fn=add_worker_priorities,
    stats_fn=q_loss_stats,
    optimizer_fn=make_adam,
    extra_learn_fetches_fn=td_error_fetches,
    mixins=[TargetNetworkMixin, ComputeTDErrorMixin, LearningRateSchedule,
            EpsilonGreedyExploration],
)
