"""SavedModel export of a TF policy for serving without tfrl.

`export_saved_model(policy, dir)` writes a SavedModel whose `serving_default` signature takes
raw observations (input "observations"; for Dict/Tuple spaces one input per leaf named
"observations_<key path>") plus, for recurrent policies, "state_in_<i>". It returns
"actions" (sampled), "deterministic_actions", "action_logp" and "deterministic_action_logp",
"action_dist_inputs" (when a distribution is used), "vf_preds" (when the model has a value
branch) and "state_out_<i>". Preprocessing, the model and the distribution are traced into the
graph, so `tf.saved_model.load(dir).signatures["serving_default"](observations=...)` needs only
TensorFlow. The same function is also the object's `compute_actions` attribute.
Only variables are saved (no Keras objects), which keeps loading independent of Keras.
"""
from __future__ import annotations

import tensorflow as tf
import tree

from tfrl.policy.sample_batch import SampleBatch


def _input_name(path) -> str:
    return "observations" + "".join(f"_{p}" for p in path)


class _ServingModule(tf.Module):
    def __init__(self, policy):
        super().__init__(name="policy_serving")
        self.model_variables = list(policy.model.variables)
        obs_spec = policy._obs_spec
        paths = [p for p, _ in tree.flatten_with_path(obs_spec)]
        flat_specs = [tf.TensorSpec(s.shape, s.dtype, name=_input_name(p))
                      for p, s in zip(paths, tree.flatten(obs_spec))]
        n_obs = len(flat_specs)
        state_specs = [tf.TensorSpec(s.shape, s.dtype, name=SampleBatch.state_in(i))
                       for i, s in enumerate(policy._state_specs)]

        def serve(*inputs):
            obs = tree.unflatten_as(obs_spec, list(inputs[:n_obs]))
            states = list(inputs[n_obs:])
            return _serving_outputs(policy, obs, states)

        self.compute_actions = tf.function(serve, input_signature=flat_specs + state_specs)


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


def export_saved_model(policy, export_dir: str) -> None:
    """Write the serving SavedModel of `policy` to `export_dir` (see module docstring)."""
    module = _ServingModule(policy)
    concrete = module.compute_actions.get_concrete_function()
    tf.saved_model.save(module, export_dir, signatures={"serving_default": concrete})
