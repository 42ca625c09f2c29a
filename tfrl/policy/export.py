"""SavedModel export of a TF policy for serving without tfrl.

`export_saved_model(policy, dir)` writes a SavedModel whose `serving_default` signature takes
raw observations (input "observations"; for Dict/Tuple spaces one input per leaf named
"observations_<key path>") plus, for recurrent policies, "state_in_<i>". It returns
"actions" (sampled), "deterministic_actions", "action_logp" and "deterministic_action_logp",
"action_dist_inputs" (when a distribution is used), "vf_preds" (when the model has a value
branch) and "state_out_<i>". For a Dict/Tuple action space the actions are one output per leaf,
named like the observation inputs: "actions_<key path>" and "deterministic_actions_<key path>"
(e.g. "actions_a_0_d" for action["a"][0]["d"]). Preprocessing, the model and the distribution are traced into the
graph, so `tf.saved_model.load(dir).signatures["serving_default"](observations=...)` needs only
TensorFlow. The same function is also the object's `compute_actions` attribute.
Only variables are saved (no Keras objects), which keeps loading independent of Keras.

A trainer's export also bakes in what a rollout worker does around the policy, so that serving
matches `Trainer.compute_action`: the observation filter (MeanStdFilter: its mean and standard
deviation at export time, as variables `observation_filter_mean/std`) is applied to the raw
observations, and for Box action spaces "actions" and "deterministic_actions" are what the env
receives: clipped to the space's bounds (clip_actions) or rescaled from [-1, 1] to them
(normalize_actions), each Box leaf of a Dict/Tuple action space alike. The log-probabilities
refer to the policy's own, unadapted actions.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tree

from tfrl.policy.sample_batch import SampleBatch


def _input_name(path, prefix: str = "observations") -> str:
    return prefix + "".join(f"_{p}" for p in path)


def _flat_action_outputs(out: dict) -> dict:
    """The outputs with nested actions (Dict/Tuple action spaces) as one output per leaf: a
    serving signature returns a flat dict of tensors."""
    for key in ("actions", "deterministic_actions"):
        if tree.is_nested(out.get(key)):
            for path, leaf in tree.flatten_with_path(out.pop(key)):
                out[_input_name(path, key)] = leaf
    return out


class _ServingModule(tf.Module):
    def __init__(self, policy, observation_filter=None, clip_actions=False,
                 normalize_actions=False):
        super().__init__(name="policy_serving")
        self.model_variables = list(policy.model.variables)
        self.observation_filter = _FilterOp(observation_filter) if observation_filter else None
        self.action_adapter = _ActionOp(policy.action_space, clip_actions, normalize_actions)
        obs_spec = policy.observation_spec
        paths = [p for p, _ in tree.flatten_with_path(obs_spec)]
        flat_specs = [tf.TensorSpec(s.shape, s.dtype, name=_input_name(p))
                      for p, s in zip(paths, tree.flatten(obs_spec))]
        n_obs = len(flat_specs)
        state_specs = [tf.TensorSpec(s.shape, s.dtype, name=SampleBatch.state_in(i))
                       for i, s in enumerate(policy.state_specs)]

        def serve(*inputs):
            flat_obs = list(inputs[:n_obs])
            if self.observation_filter is not None:
                flat_obs = [tf.cast(self.observation_filter(o), spec.dtype)
                            for o, spec in zip(flat_obs, flat_specs)]
            obs = tree.unflatten_as(obs_spec, flat_obs)
            states = list(inputs[n_obs:])
            out = _serving_outputs(policy, obs, states)
            for key in ("actions", "deterministic_actions"):
                out[key] = self.action_adapter(out[key])
            return _flat_action_outputs(out)

        self.compute_actions = tf.function(serve, input_signature=flat_specs + state_specs)


class _FilterOp(tf.Module):
    """MeanStdFilter.__call__ (update=False) in TensorFlow, in float64 like the numpy filter."""

    def __init__(self, parameters: dict):
        super().__init__(name="observation_filter")
        self.mean = tf.Variable(np.asarray(parameters["mean"], np.float64), trainable=False,
                                name="observation_filter_mean")
        self.std = tf.Variable(np.asarray(parameters["std"], np.float64), trainable=False,
                               name="observation_filter_std")
        self.demean = bool(parameters["demean"])
        self.destd = bool(parameters["destd"])
        self.clip = parameters["clip"]

    def __call__(self, obs):
        x = tf.cast(obs, tf.float64)
        if self.demean:
            x = x - self.mean
        if self.destd:
            x = x / (self.std + 1e-8)
        if self.clip is not None:
            x = tf.clip_by_value(x, -float(self.clip), float(self.clip))
        return tf.cast(x, tf.float32)


class _ActionOp:
    """ActionAdapter.__call__ (tfrl.rollout.action_adapter) in TensorFlow, for Box spaces."""

    def __init__(self, action_space, clip_actions: bool, normalize_actions: bool):
        import gymnasium

        from tfrl.spaces.structure import flatten_space

        self.leaf_ops = None
        if isinstance(action_space, (gymnasium.spaces.Tuple, gymnasium.spaces.Dict)):
            self.leaf_ops = [_ActionOp(leaf, clip_actions, normalize_actions)
                             for leaf in flatten_space(action_space)]
        is_box = isinstance(action_space, gymnasium.spaces.Box)
        self.normalize = bool(normalize_actions) and is_box
        self.clip = bool(clip_actions) and is_box and not self.normalize
        if is_box:
            self.low = tf.constant(action_space.low.astype(np.float64))
            self.high = tf.constant(action_space.high.astype(np.float64))
            self.dtype = tf.as_dtype(action_space.dtype)

    def __call__(self, actions):
        if self.leaf_ops is not None:
            return tree.unflatten_as(actions, [
                op(leaf) for op, leaf in zip(self.leaf_ops, tree.flatten(actions))])
        if self.normalize:
            a = tf.clip_by_value(tf.cast(actions, tf.float64), -1.0, 1.0)
            return tf.cast(self.low + (a + 1.0) * 0.5 * (self.high - self.low), self.dtype)
        if self.clip:
            clipped = tf.clip_by_value(tf.cast(actions, tf.float64), self.low, self.high)
            return tf.cast(clipped, self.dtype)
        return actions


def _serving_outputs(policy, obs, states):
    zero_t = tf.constant(0, tf.int64)
    sampled = policy.action_sampler(policy.model, obs, states, True, zero_t, None)
    out = {}
    if sampled is not None:
        actions, logp, state_out = sampled
        det, det_logp, _ = policy.action_sampler(policy.model, obs, states, False, zero_t, None)
        out.update(actions=actions, deterministic_actions=det)
        if logp is not None:
            out.update(action_logp=logp, deterministic_action_logp=det_logp)
    else:
        dist_inputs, dist_class, state_out = policy.action_distribution(
            policy.model, obs, states, False, zero_t)
        dist = dist_class(dist_inputs, policy.model)
        actions = dist.sample()
        det = dist.deterministic_sample()
        out.update(actions=actions, deterministic_actions=det, action_logp=dist.logp(actions),
                   deterministic_action_logp=dist.logp(det), action_dist_inputs=dist_inputs)
    if policy.model.has_value_branch:
        out["vf_preds"] = policy.model.value_function()
    for i, s in enumerate(state_out):
        out[SampleBatch.state_out(i)] = s
    return out


def export_saved_model(policy, export_dir: str, observation_filter=None,
                       clip_actions: bool = False, normalize_actions: bool = False) -> None:
    """Write the serving SavedModel of `policy` to `export_dir` (see module docstring).

    Args:
      observation_filter: a filter's `serving_parameters()` ({mean, std, demean, destd,
        clip}) applied to the raw observations, or None.
      clip_actions, normalize_actions: adapt Box actions as a rollout worker does.
    """
    module = _ServingModule(policy, observation_filter, clip_actions, normalize_actions)
    concrete = module.compute_actions.get_concrete_function()
    tf.saved_model.save(module, export_dir, signatures={"serving_default": concrete})
