"""build_tf_policy: declare a TF policy from functions (RLlib classic), get a TFPolicy subclass.

    MyPolicy = build_tf_policy("MyPolicy", loss_fn=my_loss, postprocess_fn=my_postprocess)
    Variant = MyPolicy.with_updates(name="Variant", stats_fn=my_stats)

Hooks (all optional except loss_fn), their signatures, and when they run
(construction order is detailed in tf_policy.py):

  get_default_config() -> dict
      Once per construction, first: defaults that the given config updates.
  validate_spaces(policy, observation_space, action_space, config) -> None
      At construction, before anything is built; raise UnsupportedSpaceError to refuse.
  before_init(policy, observation_space, action_space, config) -> None
      At construction, before the model is built.
  make_model(policy, observation_space, action_space, config) -> TFModel
      At construction; default: ModelCatalog.get_model with config["model"]. May also set
      policy.target_model (used by TargetNetworkMixin).
  optimizer_fn(policy, config) -> tf_keras optimizer
      At construction after the model; default Adam(config["lr"]).
  before_loss_init(policy, observation_space, action_space, config) -> None
      After model, optimizer and mixin setup, before the dummy loss pass.
  loss_fn(policy, model, dist_class, train_batch) -> scalar loss tensor
      Traced in every learn step (also once eagerly on a dummy batch at construction).
      train_batch is a dict of tensors; the columns it reads define the learn signature.
      Store intermediate tensors on the policy (policy.pi_loss = ...) for stats_fn.
  stats_fn(policy, train_batch) -> dict of scalar tensors
      Traced right after loss_fn in the same trace; may read what loss_fn stored.
  extra_learn_fetches_fn(policy) -> dict of per-sample tensors [B]
      Traced right after stats_fn; e.g. {"td_error": policy.td_error} for priorities.
  gradients_fn(policy, optimizer, tape, loss) -> list of (grad, var)
      Traced in the learn step; `tape` recorded the loss. Default: gradient w.r.t. the model's
      trainable variables, clipped by global norm if config["grad_clip"]. Classic RLlib's
      three-argument form gradients_fn(policy, optimizer, loss) is accepted: it may call
      `tf.gradients(loss, ...)` (the learn step is a graph) or classic
      `optimizer.compute_gradients(loss, var_list=None)` (ClassicOptimizerView).
  grad_stats_fn(policy, train_batch, grads) -> dict of scalar tensors
      Traced after gradients_fn; default {"grad_gnorm": global norm}.
  apply_gradients_fn(policy, optimizer, grads_and_vars) -> None
      Traced after grad_stats_fn; default optimizer.apply_gradients.
  postprocess_fn(policy, sample_batch, other_agent_batches=None, episode=None) -> SampleBatch
      Eager, on the rollout worker, once per trajectory piece (one env's rows of one episode
      within a sampled fragment; and once at construction on the dummy batch, so the columns it
      adds are known to the loss).
  postprocess_fragment_fn(policy, batch) -> SampleBatch
      Eager, on the rollout worker, once per sampled fragment: all of the policy's rows of it,
      after postprocess_fn of each piece (e.g. Ape-X's worker-side priorities, one TD-error
      call for the fragment rather than one per episode piece).
  action_distribution_fn(policy, model, obs_batch, state_batches, explore, timestep)
      -> (dist_inputs, dist_class, state_out)
      Traced in action computation instead of "model outputs + catalog distribution".
  action_sampler_fn(policy, model, obs_batch, state_batches, explore, timestep, seed)
      -> (actions, logp or None, state_out)
      Traced in action computation; bypasses distributions entirely (e.g. epsilon-greedy Q).
  extra_action_out_fn(policy, input_dict, state_batches, model, action_dist) -> dict
      Traced after actions are chosen; extra per-row tensors for the trajectory (action_dist
      is None when action_sampler_fn is used). vf_preds is added automatically when the model
      has a value branch.
  extra_action_fetches_fn(policy) -> dict
      RLlib's earlier name of extra_action_out_fn, with its one-argument form: traced at the
      same point, it returns per-row tensors the action hooks stored on the policy (e.g.
      `policy.q_values`). The five-argument form of extra_action_out_fn is accepted too.
  after_init(policy, observation_space, action_space, config) -> None
      Last step of construction.
  mixins: list of classes placed before TFPolicy in the bases (see mixins.py); as classic,
      construction calls TFPolicy.__init__ itself, not a mixin's own __init__ (hooks call those).
  obs_include_prev_action_reward: classic RLlib's switch for feeding previous actions and
      rewards to the model; accepted for classic declarations (tfrl models read the columns
      they need from the batch, so it changes nothing).
  get_batch_divisibility_req(policy) -> int
      After init; stored as policy.batch_divisibility_req (learn batches should be multiples).

Observation tensors passed to the hooks are raw observations; models preprocess them.
Classes built here are picklable by reference when assigned to a module-level name equal to
`name`; otherwise cloudpickle (used by Ray) serialises them by value.
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional, Sequence

from tfrl.errors import InvalidConfigError
from tfrl.policy.tf_policy import TFPolicy

_HOOKS = (
    "get_default_config", "postprocess_fn", "postprocess_fragment_fn", "stats_fn",
    "optimizer_fn", "gradients_fn", "apply_gradients_fn", "grad_stats_fn", "extra_action_out_fn",
    "extra_learn_fetches_fn",
    "validate_spaces", "before_init", "before_loss_init", "after_init", "make_model",
    "action_sampler_fn", "action_distribution_fn", "get_batch_divisibility_req")


def build_tf_policy(name: str, *, loss_fn: Callable, get_default_config: Optional[Callable] = None,
                    postprocess_fn=None, postprocess_fragment_fn=None, stats_fn=None,
                    optimizer_fn=None, gradients_fn=None,
                    apply_gradients_fn=None, grad_stats_fn=None, extra_action_out_fn=None,
                    extra_learn_fetches_fn=None, validate_spaces=None, before_init=None,
                    before_loss_init=None, after_init=None, make_model=None,
                    action_sampler_fn=None, action_distribution_fn=None,
                    mixins: Optional[Sequence[type]] = None, get_batch_divisibility_req=None,
                    extra_action_fetches_fn=None, obs_include_prev_action_reward: bool = True,
                    _module: Optional[str] = None) -> type:
    """A TFPolicy subclass named `name` whose pieces are the given hooks (module docstring).

    Raises:
        InvalidConfigError: if loss_fn is missing, a hook is not callable, or both
            extra_action_out_fn and its alias extra_action_fetches_fn are given.
    """
    kwargs = dict(locals())
    kwargs.pop("_module")
    if not callable(loss_fn):
        raise InvalidConfigError(f"build_tf_policy({name!r}) needs a callable loss_fn.")
    if extra_action_fetches_fn is not None:
        if extra_action_out_fn is not None:
            raise InvalidConfigError(
                f"build_tf_policy({name!r}): extra_action_fetches_fn is another name of "
                "extra_action_out_fn; give one of them.")
        if not callable(extra_action_fetches_fn):
            raise InvalidConfigError(f"build_tf_policy({name!r}): extra_action_fetches_fn must be "
                                     f"callable, got {extra_action_fetches_fn!r}.")
        extra_action_out_fn = extra_action_fetches_fn
    for hook in _HOOKS:
        if kwargs[hook] is not None and not callable(kwargs[hook]):
            raise InvalidConfigError(f"build_tf_policy({name!r}): {hook} must be callable, "
                                     f"got {kwargs[hook]!r}.")
    if _module is None:
        caller = inspect.currentframe().f_back
        _module = caller.f_globals.get("__name__", __name__) if caller else __name__

    def method_get_default_config(cls):
        config = TFPolicy.get_default_config()
        if get_default_config is not None:
            config.update(get_default_config())
        return config

    body = {"get_default_config": classmethod(method_get_default_config),
            "_build_kwargs": kwargs, "__module__": _module, "__qualname__": name,
            "__doc__": f"TF policy {name!r} built with build_tf_policy."}

    # Plain `def`s rather than lambdas: AutoGraph converts these when they are traced.
    def loss(self, model, dist_class, train_batch):
        return loss_fn(self, model, dist_class, train_batch)

    body["loss"] = loss
    if stats_fn:
        def stats(self, train_batch):
            return stats_fn(self, train_batch)
        body["stats"] = stats
    if extra_learn_fetches_fn:
        def extra_learn_fetches(self):
            return extra_learn_fetches_fn(self)
        body["extra_learn_fetches"] = extra_learn_fetches
    if postprocess_fn:
        def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
            return postprocess_fn(self, sample_batch, other_agent_batches, episode)
        body["postprocess_trajectory"] = postprocess_trajectory
    if postprocess_fragment_fn:
        def postprocess_fragment(self, batch):
            return postprocess_fragment_fn(self, batch)
        body["postprocess_fragment"] = postprocess_fragment
    if optimizer_fn:
        def make_optimizer(self):
            return optimizer_fn(self, self.config)
        body["make_optimizer"] = make_optimizer
    if gradients_fn:
        if _positional_count(gradients_fn) == 3:  # classic gradients_fn(policy, optimizer, loss)
            def gradients(self, optimizer, tape, loss):
                return gradients_fn(self, ClassicOptimizerView(optimizer, tape, self), loss)
        else:
            def gradients(self, optimizer, tape, loss):
                return gradients_fn(self, optimizer, tape, loss)
        body["gradients"] = gradients
    if apply_gradients_fn:
        def apply_gradients_op(self, optimizer, grads_and_vars):
            return apply_gradients_fn(self, optimizer, grads_and_vars)
        body["apply_gradients_op"] = apply_gradients_op
    if grad_stats_fn:
        def grad_stats(self, train_batch, grads):
            return grad_stats_fn(self, train_batch, grads)
        body["grad_stats"] = grad_stats
    if extra_action_out_fn:
        if _takes_only_the_policy(extra_action_out_fn):  # RLlib's extra_action_fetches_fn(policy)
            def extra_action_out(self, input_dict, state_batches, model, action_dist):
                return extra_action_out_fn(self)
        else:
            def extra_action_out(self, input_dict, state_batches, model, action_dist):
                return extra_action_out_fn(self, input_dict, state_batches, model, action_dist)
        body["extra_action_out"] = extra_action_out
    for hook_name, hook in (("validate_spaces", validate_spaces), ("before_init", before_init),
                            ("before_loss_init", before_loss_init),
                            ("after_init", after_init)):
        if hook:
            def stage(self, observation_space, action_space, config, _hook=hook):
                return _hook(self, observation_space, action_space, config)
            body[hook_name] = stage
    if make_model:
        def make_model_method(self):
            return make_model(self, self.observation_space, self.action_space, self.config)
        body["make_model"] = make_model_method
    if action_sampler_fn:
        def action_sampler(self, model, obs_batch, state_batches, explore, timestep, seed):
            return action_sampler_fn(self, model, obs_batch, state_batches, explore, timestep,
                                     seed)
        body["action_sampler"] = action_sampler
    if action_distribution_fn:
        def action_distribution(self, model, obs_batch, state_batches, explore, timestep):
            return action_distribution_fn(self, model, obs_batch, state_batches, explore,
                                          timestep)
        body["action_distribution"] = action_distribution
    if get_batch_divisibility_req:
        def batch_divisibility(self):
            return get_batch_divisibility_req(self)
        body["get_batch_divisibility_req"] = batch_divisibility

    def __init__(self, *args, **kwargs):
        # TFPolicy's constructor itself, as classic build_tf_policy called it: a mixin's own
        # __init__ (classic mixins take other arguments, e.g. `CentralizedValueMixin(self)`) is
        # the hooks' to call; tfrl's mixins set themselves up (mixins.py)
        TFPolicy.__init__(self, *args, **kwargs)

    body["__init__"] = __init__
    bases = tuple(mixins or ()) + (TFPolicy,)
    policy_cls = type(name, bases, body)

    def with_updates(**overrides):
        """A new policy class: this one's build arguments updated with `overrides`.

        Raises:
            InvalidConfigError: on unknown build arguments.
        """
        unknown = set(overrides) - set(kwargs)
        if unknown:
            raise InvalidConfigError(
                f"with_updates got unknown argument(s) {sorted(unknown)}; valid ones are "
                f"{sorted(kwargs)}.")
        caller = inspect.currentframe().f_back
        module = caller.f_globals.get("__name__", _module) if caller else _module
        for name, alias in (("extra_action_out_fn", "extra_action_fetches_fn"),
                            ("extra_action_fetches_fn", "extra_action_out_fn")):
            if name in overrides and alias not in overrides:
                overrides = dict(overrides, **{alias: None})  # the new hook replaces the old
        return build_tf_policy(**dict(kwargs, **overrides), _module=module)

    policy_cls.with_updates = staticmethod(with_updates)
    return policy_cls


def _positional_count(fn: Callable) -> Optional[int]:
    """How many positional parameters `fn` declares (None: *args, or no signature)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def _takes_only_the_policy(fn: Callable) -> bool:
    """True for a hook declared as fn(policy): one positional parameter, no *args."""
    return _positional_count(fn) == 1


class ClassicOptimizerView:
    """The policy's optimizer as a classic three-argument gradients_fn sees it: classic
    `compute_gradients(loss, var_list=None, **ignored)` (TF1 keywords such as
    colocate_gradients_with_ops are accepted and mean nothing under TF2) returns (grad, var)
    pairs from the learn step's tape; everything else is the optimizer's own."""

    def __init__(self, optimizer, tape, policy):
        self._optimizer = optimizer
        self._tape = tape
        self._policy = policy

    def compute_gradients(self, loss, var_list=None, **_tf1_options):
        variables = list(var_list if var_list is not None
                         else self._policy.model.trainable_variables)
        return list(zip(self._tape.gradient(loss, variables), variables))

    def __getattr__(self, name):
        return getattr(self._optimizer, name)
