"""TFModel: the base class of every policy model (RLlib's classic ModelV2 shape, on tf_keras).

A model is a `tf.Module` that owns tf_keras layers/models (so its variables are tracked for
weights, checkpoints and SavedModel export) and implements

    forward(input_dict, state, seq_lens) -> (outputs [B, num_outputs], new_state list)
    value_function() -> [B] value of the rows of the last forward call (if has_value_branch)
    get_initial_state() -> list of numpy arrays (one per recurrent state tensor, no batch dim)
    custom_loss(policy_loss, loss_inputs) -> the loss the policy minimises (default: unchanged)
    metrics() -> {name: scalar tensor}, reported with the learner stats under "model"

Every TFPolicy passes its loss through `custom_loss` (with the train batch, whose columns the
model may read) and adds `metrics()` to its learn-step stats, as classic RLlib's ModelV2 does;
both are traced in the learn step.

Calling the model (`model(input_dict, state, seq_lens)`) adds `input_dict["obs_flat"]`, the
preprocessed float observations (see preprocessors.py), and calls forward. `input_dict["obs"]`
keeps the raw observations, except for a custom model on a Discrete, Dict or Tuple space, which
reads them as classic RLlib's models did (`use_classic_inputs`). A classic model that builds TF1
layers in `forward` (`tf.compat.v1.layers.dense` under `variable_scope(reuse=AUTO_REUSE)`) gets
its variables created on the first call and reused on the next, tracked by the model. Models are built by the
ModelCatalog (catalog.py); custom models subclass TFModel and are registered there. Create all
variables in `__init__` (build keras models with `keras.Input`), so that a policy constructed
inside a `tf.distribute` strategy scope gets mirrored variables.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf
from tf_keras.api._v1.keras.utils import track_tf1_style_variables

from tfrl.errors import NotSupportedError
from tfrl.config.model import merge_model_config
from tfrl.models.preprocessors import (classic_restored_obs, classic_unflattened_obs,
                                      get_preprocessor)


class VariableList(tuple):
    """A model's variables: a tuple (tf.Module's form) that can also be called, as classic
    RLlib's `model.trainable_variables()` / `model.variables()` are."""

    def __call__(self, as_dict: bool = False):
        return {v.name: v for v in self} if as_dict else self


def _unique(variables) -> tuple:
    seen = set()
    return tuple(v for v in variables if not (id(v) in seen or seen.add(id(v))))


class TFModel(tf.Module):
    """Base model; see the module docstring for the contract."""

    has_value_branch = False
    # whether forward reads input_dict["prev_actions"] and ["prev_rewards"]
    # (tfrl/models/prev_action_reward.py): its policy then gives them when acting and learning
    reads_prev_action_reward = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # a classic ModelV2 says it has a value branch by implementing value_function()
        if "value_function" in cls.__dict__ and "has_value_branch" not in cls.__dict__:
            cls.has_value_branch = True

    def __init__(self, obs_space, action_space, num_outputs, model_config: Dict, name: str):
        super().__init__(name=name)
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = merge_model_config(model_config)
        self.preprocessor = get_preprocessor(obs_space)(obs_space)

    def use_classic_inputs(self, original_space, preprocessed: bool = False) -> None:
        """Makes this model, built with classic RLlib's flat preprocessed space of
        `original_space` (`classic_observation_space`), read observations as classic RLlib's
        models did: `obs_flat` the flat preprocessed rows, `obs` one-hot Discrete parts in the
        space's structure (custom models, catalog.py). It is given raw observations of
        `original_space`, or with `preprocessed` those flat rows themselves (a policy the
        worker hands classic preprocessed observations, tfrl/rollout/classic_preprocessing.py)."""
        if not preprocessed:
            self.preprocessor = get_preprocessor(original_space)(original_space)
        self._classic_original_space = original_space
        self._classic_rows_given = preprocessed

    def __call__(self, input_dict: Dict, state: Sequence = (), seq_lens=None):
        input_dict = dict(input_dict)
        input_dict["obs_flat"] = self.preprocessor.tf_transform(input_dict["obs"])
        original = getattr(self, "_classic_original_space", None)
        if original is not None:
            input_dict["obs"] = (
                classic_unflattened_obs(original, input_dict["obs_flat"])
                if self._classic_rows_given else classic_restored_obs(original, input_dict["obs"]))
        input_dict.setdefault("is_training", False)  # classic ModelV2's flag (from_batch: True)
        outputs, new_state = self._forward_keeping_tf1_variables(
            input_dict, list(state or []), seq_lens)
        self._last_output = outputs
        return outputs, list(new_state)

    @track_tf1_style_variables
    def _forward_keeping_tf1_variables(self, input_dict: Dict, state: List, seq_lens):
        # TF1-style variables (tf.compat.v1.get_variable, its layers) made in forward live in a
        # store of this model, by scope name, so that the next call reuses them
        return self.forward(input_dict, state, seq_lens)

    def last_output(self):
        """The outputs of the last call (classic ModelV2.last_output)."""
        return self._last_output

    @property
    def variables(self) -> VariableList:
        return VariableList(_unique(super().variables))

    @property
    def trainable_variables(self) -> VariableList:
        return VariableList(_unique(super().trainable_variables))

    def register_variables(self, variables) -> None:
        """Classic TFModelV2 models list their Keras variables here. tfrl's models are
        tf.Modules, which find the tf.Variables of their attributes (tf_keras layers included)
        themselves; the variables of Keras 3 layers (`keras.Variable`, which a tf.Module does not
        see) are kept here through the tf.Variable each one holds, so that a model built with
        Keras 3 trains and syncs its weights too."""
        registered = self.__dict__.setdefault("_registered_keras_variables", [])
        known = {id(v) for v in registered}
        for variable in variables:
            held = variable if isinstance(variable, tf.Variable) else getattr(variable, "value", None)
            if isinstance(held, tf.Variable) and not isinstance(variable, tf.Variable) \
                    and id(held) not in known:
                registered.append(held)
                known.add(id(held))

    def custom_loss(self, policy_loss, loss_inputs):
        """The loss to minimise given the policy's loss and the train batch (classic ModelV2's
        hook, e.g. to add a supervised or auxiliary term). Default: `policy_loss` unchanged."""
        return policy_loss

    def metrics(self) -> Dict:
        """{name: scalar tensor} reported with the learner stats under "model" (classic
        ModelV2's hook; may read values the last forward or custom_loss stored). Default: {}."""
        return {}

    def from_batch(self, train_batch: Dict):
        """Call the model on a training batch: its obs (and prev_actions / prev_rewards for a
        model that reads them), state_in_i and (recurrent) seq_lens.

        The convenient way for loss functions to run the model: recurrent and feed-forward
        models alike.
        """
        num_states = len(self.get_initial_state())
        states = [train_batch[f"state_in_{i}"] for i in range(num_states)]
        seq_lens = train_batch["seq_lens"] if num_states else None
        inputs = {"obs": train_batch["obs"], "is_training": True}
        if self.reads_prev_action_reward:
            inputs["prev_actions"] = train_batch["prev_actions"]
            inputs["prev_rewards"] = train_batch["prev_rewards"]
        return self(inputs, states, seq_lens)

    def forward(self, input_dict: Dict, state: List, seq_lens):
        """Compute model outputs; see the module docstring."""
        raise NotImplementedError

    def value_function(self):
        """Values [B] for the last forward call.

        Raises:
            NotSupportedError: if the model has no value branch.
        """
        raise NotSupportedError(
            f"{type(self).__name__} has no value branch; set has_value_branch and implement "
            "value_function(), or use a postprocessor that needs no critic.")

    def get_initial_state(self) -> List[np.ndarray]:
        """Initial recurrent state (empty for feed-forward models)."""
        return []

    def is_recurrent(self) -> bool:
        return len(self.get_initial_state()) > 0

    def state_specs(self) -> List[tf.TensorSpec]:
        """TensorSpecs of a batch of each state tensor (batch dimension open)."""
        return [tf.TensorSpec([None, *np.shape(s)], tf.as_dtype(np.asarray(s).dtype))
                for s in self.get_initial_state()]
