"""A TFPolicy's previous-action-and-reward inputs, for a model that reads them.

Part of the policy layer (tfrl/policy/tf_policy.py): a model built with
`lstm_use_prev_action_reward` (tfrl/models/prev_action_reward.py) reads the previous actions
and rewards beside the observations. `PrevActionInputs`, a base of `TFPolicy`, holds their
specs (the last inputs of the traced action and value functions) and hands the model the
batches of the call being traced through `model_inputs`, which the overridable hooks
(`action_distribution`, `action_sampler`) call without knowing about them.
"""
from __future__ import annotations

import contextlib
from typing import Dict

import tensorflow as tf
import tree

from tfrl.models.prev_action_reward import PREV_REWARD_SPEC, prev_action_spec
from tfrl.policy.sample_batch import SampleBatch


class PrevActionInputs:
    """The previous actions and rewards as model inputs (a base of `TFPolicy`)."""

    def _set_up_prev_inputs(self, action_space) -> None:
        # [actions nest, rewards] after the other inputs of the action and value functions
        self._prev_specs = ([prev_action_spec(action_space), PREV_REWARD_SPEC]
                            if self.model.reads_prev_action_reward else [])
        self._acting_prev = None

    @property
    def reads_prev_action_reward(self) -> bool:
        """Whether the model reads the previous action and reward (env runners then pass them
        to `compute_actions` and record them as `prev_actions` / `prev_rewards`)."""
        return bool(self._prev_specs)

    @contextlib.contextmanager
    def _acting_on(self, prev):
        """While a traced call runs: `model_inputs` hands the model `prev` ([actions,
        rewards], or nothing)."""
        self._acting_prev = list(prev) or None
        try:
            yield
        finally:
            self._acting_prev = None

    def model_inputs(self, obs_batch) -> Dict:
        """The model's input dict when acting on `obs_batch` (traced): the observations, and
        for a model that reads them the previous actions and rewards of the call being traced
        (zeros, as at an episode's first step, where the caller gave none)."""
        inputs = {SampleBatch.OBS: obs_batch}
        if self._prev_specs:
            prev = self._acting_prev
            if prev is None:
                rows = tf.shape(tf.nest.flatten(obs_batch)[0])[:1]
                prev = [tree.map_structure(
                    lambda spec: tf.zeros(tf.concat([rows, spec.shape[1:]], 0), spec.dtype), spec)
                    for spec in self._prev_specs]
            inputs[SampleBatch.PREV_ACTIONS], inputs[SampleBatch.PREV_REWARDS] = prev
        return inputs
