"""A TFPolicy's variables, weights and state, and its export as a SavedModel.

Part of the policy layer (tfrl/policy/tf_policy.py): `TFPolicyState`, a base of `TFPolicy`,
reads the model's variables in one traced call (`get_weights`), assigns weights and whole
states (optimizer slots, counters, mixins' variables) only after checking that every array
fits (`CheckpointError` otherwise, nothing changed), and writes the SavedModel (export.py).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf

from tfrl.errors import CheckpointError


class TFPolicyState:
    """Weights, state and export of a TFPolicy (a base of `TFPolicy`, on whose model,
    optimizer, counters and `_extra_state_variables` it works)."""

    @property
    def model_variables(self) -> List[tf.Variable]:
        # Walking the module tree costs about as much as assigning a small network's weights,
        # and weight syncs happen every few sampling rounds; the built model's variables are fixed.
        return list(self._model_variables_and_reader()[0])

    def _model_variables_and_reader(self):
        """(the built model's variables, a tf.function returning all their values), cached."""
        cached = self.__dict__.get("_model_variables_cache")
        if cached is None or cached[0] is not self.model:
            variables = list(self.model.variables)
            if not variables:
                return [], None  # not built yet
            # One traced read instead of a `.numpy()` per variable: a distributed variable's
            # eager read costs several ops and Python frames each (about 3x slower in total).
            reader = tf.function(lambda: [tf.identity(v) for v in variables], autograph=False)
            cached = (self.model, variables, reader)
            self.__dict__["_model_variables_cache"] = cached
        return cached[1], cached[2]

    @property
    def trainable_variables(self) -> List[tf.Variable]:
        return list(self.model.trainable_variables)

    def get_weights(self) -> List[np.ndarray]:
        """Model variables as a list of numpy arrays (cheap, picklable)."""
        variables, reader = self._model_variables_and_reader()
        return [t.numpy() for t in reader()] if variables else []

    def set_weights(self, weights) -> None:
        """Assign weights from `get_weights`.

        Raises:
            CheckpointError: if their number or shapes do not match the model.
        """
        assign_checked(self.model_variables, weights, "model weights")

    def get_state(self) -> Dict:
        state = {
            "weights": self.get_weights(),
            "optimizer_variables": [v.numpy() for v in self.optimizer.variables],
            "learning_rate": float(self.optimizer.learning_rate.numpy()),
            "global_timestep": int(self.global_timestep),
            "num_grad_updates": int(self.num_grad_updates),
            "extra": {k: [v.numpy() for v in vs]
                      for k, vs in self._extra_state_variables.items()},
        }
        return state

    def set_state(self, state: Dict) -> None:
        """Restore a state from `get_state` (weights, optimizer slots, counters, mixin state).

        Raises:
            CheckpointError: if the state does not fit this policy; nothing is changed then.
        """
        try:
            pairs = list(zip(self.model.variables, state["weights"]))
            opt_vars = self.optimizer.variables
            _check_fit(self.model.variables, state["weights"], "model weights")
            _check_fit(opt_vars, state["optimizer_variables"], "optimizer variables")
            extra = state.get("extra", {})
            for k, vs in self._extra_state_variables.items():
                if k not in extra:
                    raise CheckpointError(f"The state has no {k!r} entry; it was saved by a "
                                          "different policy class.")
                _check_fit(vs, extra[k], k)
        except KeyError as exc:
            raise CheckpointError(f"Policy state lacks {exc}; pass a dict from get_state().") from exc
        for v, w in pairs:
            v.assign(w)
        for v, w in zip(opt_vars, state["optimizer_variables"]):
            v.assign(w)
        for k, vs in self._extra_state_variables.items():
            for v, w in zip(vs, state["extra"][k]):
                v.assign(w)
        self.__dict__.pop("_scheduled_values_written", None)  # scheduled coefficients: rewrite
        self.optimizer.learning_rate = state.get("learning_rate", self.config["lr"])
        self.global_timestep = int(state.get("global_timestep", 0))
        self.num_grad_updates = int(state.get("num_grad_updates", 0))

    def export_model(self, export_dir: str, observation_filter=None, clip_actions: bool = False,
                     normalize_actions: bool = False) -> None:
        """Write a SavedModel usable with plain `tf.saved_model.load` (see export.py).

        `observation_filter` (a filter's `serving_parameters()`) is applied to the raw
        observations inside the model; `clip_actions` / `normalize_actions` make Box actions
        come out as a rollout worker sends them to its env.
        """
        from tfrl.policy.export import export_saved_model
        export_saved_model(self, export_dir, observation_filter=observation_filter,
                           clip_actions=clip_actions, normalize_actions=normalize_actions)


def _check_fit(variables, values, what):
    values = list(values)
    if len(values) != len(variables):
        raise CheckpointError(
            f"{what}: got {len(values)} arrays for {len(variables)} variables; the state comes "
            "from a policy with a different model or optimizer config.")
    for v, w in zip(variables, values):
        if tuple(np.shape(w)) != tuple(v.shape):
            raise CheckpointError(
                f"{what}: shape {np.shape(w)} does not fit variable {v.name} of shape "
                f"{tuple(v.shape)}; the state comes from a differently configured policy.")

def assign_checked(variables, values, what: str) -> None:
    """Assigns `values` to `variables`.

    Raises:
      CheckpointError: their number or shapes differ (`what` names them in the message).
    """
    _check_fit(variables, values, what)
    for v, w in zip(variables, values):
        v.assign(w)
