"""Policy: the framework-neutral interface every policy implements (RLlib classic).

A policy holds the numerical parts of one algorithm: a model that computes actions, a
trajectory postprocessor, and a loss. Rollout workers call `compute_actions` and
`postprocess_trajectory`; policy optimizers and the learner call `learn_on_batch` (or
`compute_gradients` / `apply_gradients`); trainers call `get_state`/`set_state`,
`export_checkpoint`/`import_checkpoint`, `export_model` and `on_global_var_update`.
Everything distributed stays outside the policy. The TensorFlow implementation is TFPolicy
(tf_policy.py), usually built with build_tf_policy (tf_policy_template.py).

Checkpoints written by `export_checkpoint` hold no pickles: a JSON file with the structure of
`get_state()` and an `.npz` file of its arrays (loaded with allow_pickle=False).
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Tuple

import numpy as np
import tree

from tfrl.config.defaults import COMMON_CONFIG
from tfrl.errors import CheckpointError
from tfrl.policy.sample_batch import SampleBatch

CHECKPOINT_PREFIX = "policy_state"


class Policy:
    """Abstract policy. Subclasses implement at least compute_actions and learn_on_batch.

    Attributes:
        observation_space, action_space: the gymnasium spaces of the environment.
        config: the policy config dict.
        global_timestep: environment steps seen so far (driven by `on_global_var_update`).
    """

    # Whether the policy turns raw observations into its inputs itself (TFPolicy: inside its
    # traced functions). A hand-written policy does not: as classic RLlib's workers did, the
    # rollout worker builds it with the flat preprocessed space and hands it one-hot Discrete
    # and flattened Dict / Tuple observations (tfrl/rollout/classic_preprocessing.py).
    preprocesses_observations = False
    # Whether compute_actions reads prev_action_batch / prev_reward_batch: env runners then
    # give them and record them as the `prev_actions` / `prev_rewards` columns
    # (TFPolicy: when its model reads them, tfrl/models/prev_action_reward.py)
    reads_prev_action_reward = False

    @classmethod
    def takes_classic_observations(cls, config: Dict) -> bool:
        """Whether the rollout worker builds a policy of this class with `config`, on a
        Discrete / Dict / Tuple observation space, with classic RLlib's flat preprocessed space
        and hands it preprocessed observations (tfrl/rollout/classic_preprocessing.py): a
        policy that does not preprocess them itself."""
        return not cls.preprocesses_observations

    def __init__(self, observation_space, action_space, config: Dict):
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.global_timestep = 0

    # ----- acting ------------------------------------------------------------------------
    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs
                        ) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        """Actions for a batch of observations: (actions, state_outs, extra_fetches)."""
        raise NotImplementedError

    def compute_single_action(self, obs, state=None, explore=None, timestep=None):
        """One action for one observation: (action, state_out list, extra_fetches dict)."""
        batch_obs = tree.map_structure(lambda x: np.asarray(x)[None], obs)
        states = [np.asarray(s)[None] for s in state] if state else None
        actions, state_out, extras = self.compute_actions(batch_obs, states, explore=explore,
                                                          timestep=timestep)
        return (tree.map_structure(lambda a: a[0], actions), [s[0] for s in state_out],
                {k: tree.map_structure(lambda a: a[0], v) for k, v in extras.items()})

    def get_initial_state(self) -> List[np.ndarray]:
        """Initial recurrent state, one array per state tensor (empty if not recurrent)."""
        return []

    def is_recurrent(self) -> bool:
        return len(self.get_initial_state()) > 0

    def num_state_tensors(self) -> int:
        return len(self.get_initial_state())

    def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches=None,
                               episode=None) -> SampleBatch:
        """Add algorithm-specific columns to a trajectory fragment (default: unchanged)."""
        return sample_batch

    def postprocess_fragment(self, batch: SampleBatch) -> SampleBatch:
        """Add columns to all of this policy's rows of one sampled fragment at once, after
        `postprocess_trajectory` of each of its pieces (episodes, envs): for work that needs no
        episode context and costs less in one call than per piece (default: unchanged)."""
        return batch

    def compute_log_likelihoods(self, actions, obs_batch, *args, **kwargs) -> np.ndarray:
        """log pi(actions | obs) [B] (classic Policy's method; TFPolicy implements it).

        Raises:
            NotSupportedError (a NotImplementedError): this policy does not implement it.
        """
        from tfrl.errors import NotSupportedError

        raise NotSupportedError(f"{type(self).__name__} has no action likelihoods")

    def _create_exploration(self):
        """The Exploration object of `config["exploration_config"]` (classic RLlib; default
        StochasticSampling), for the policy's action space, `model` and `framework` if it has
        them; the existing `self.exploration` if there is one. Hand-coded policies call it in
        `__init__`.

        Raises:
            InvalidConfigError: a malformed exploration_config (see exploration.py).
        """
        from tfrl.policy.exploration import exploration_from_config

        if getattr(self, "exploration", None) is not None:
            return self.exploration
        return exploration_from_config(
            self.config.get("exploration_config"), self.action_space, policy_config=self.config,
            model=getattr(self, "model", None),
            num_workers=self.config.get("num_workers", COMMON_CONFIG["num_workers"]),
            worker_index=self.config.get("worker_index", 0),  # (not a setting: 0 is the local worker)
            framework=getattr(self, "framework", "tf"))

    # ----- learning ----------------------------------------------------------------------
    def learn_on_batch(self, samples: SampleBatch) -> Dict:
        """One gradient step on `samples`; returns stats."""
        raise NotImplementedError

    def compute_gradients(self, samples: SampleBatch):
        """(gradients as numpy arrays, stats) for `samples`, without applying them."""
        raise NotImplementedError

    def apply_gradients(self, gradients) -> None:
        """Apply gradients computed by `compute_gradients` (possibly by another policy copy)."""
        raise NotImplementedError

    # ----- weights and state -------------------------------------------------------------
    def get_weights(self):
        """Model weights as plain numpy data (cheap and picklable)."""
        raise NotImplementedError

    def set_weights(self, weights) -> None:
        raise NotImplementedError

    def get_state(self) -> Dict:
        """Everything needed to resume: weights plus counters (subclasses add optimizer)."""
        return {"weights": self.get_weights(), "global_timestep": int(self.global_timestep)}

    def set_state(self, state: Dict) -> None:
        self.set_weights(state["weights"])
        self.global_timestep = int(state.get("global_timestep", 0))

    def on_global_var_update(self, global_vars: Dict) -> None:
        """Called by the trainer with {"timestep": t, ...}; drives schedules."""
        self.global_timestep = int(global_vars.get("timestep", self.global_timestep))

    # ----- files -------------------------------------------------------------------------
    def export_model(self, export_dir: str, observation_filter=None, clip_actions: bool = False,
                     normalize_actions: bool = False) -> None:
        """Write a servable model (TF: a SavedModel) taking raw observations: the observation
        filter's parameters (`Filter.serving_parameters()`, None for none) are applied inside
        it, and Box actions are clipped / rescaled to the action space as requested."""
        raise NotImplementedError

    def export_checkpoint(self, export_dir: str) -> str:
        """Write `get_state()` to `export_dir` (JSON structure + npz arrays); returns the
        path prefix of the files written.

        Raises:
            CheckpointError: if the directory cannot be written.
        """
        state = self.get_state()
        leaves = tree.flatten(state)
        arrays = {f"a{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
        for key, arr in arrays.items():
            if arr.dtype.hasobject:
                raise CheckpointError(
                    f"Policy state leaf {key} holds Python objects; state must be numeric.")
        structure = tree.map_structure(lambda _: None, state)
        kinds = [type(leaf).__name__ if isinstance(leaf, (int, float, bool)) else "array"
                 for leaf in leaves]
        prefix = os.path.join(export_dir, CHECKPOINT_PREFIX)
        try:
            os.makedirs(export_dir, exist_ok=True)
            np.savez(prefix + ".npz", **arrays)
            with open(prefix + ".json", "w", encoding="utf-8") as f:
                json.dump({"structure": _to_jsonable(structure), "kinds": kinds,
                           "policy_class": type(self).__name__}, f)
        except OSError as exc:
            raise CheckpointError(f"Cannot write a policy checkpoint to {export_dir!r}: {exc}") from exc
        return prefix

    def import_checkpoint(self, import_dir: str) -> None:
        """Restore a checkpoint written by `export_checkpoint` (weights, optimizer, counters).

        Raises:
            CheckpointError: if the files are missing, corrupt, or do not fit this policy.
        """
        prefix = os.path.join(import_dir, CHECKPOINT_PREFIX)
        try:
            with open(prefix + ".json", encoding="utf-8") as f:
                meta = json.load(f)
            with np.load(prefix + ".npz", allow_pickle=False) as data:
                arrays = [data[f"a{i}"] for i in range(len(meta["kinds"]))]
        except (OSError, KeyError, ValueError) as exc:
            raise CheckpointError(
                f"No readable policy checkpoint in {import_dir!r} ({exc}); pass the directory "
                "given to export_checkpoint.") from exc
        leaves = [int(a) if k == "int" else float(a) if k == "float" else bool(a) if
                  k == "bool" else a for a, k in zip(arrays, meta["kinds"])]
        structure = _from_jsonable(meta["structure"])
        try:
            state = tree.unflatten_as(structure, leaves)
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"Checkpoint in {import_dir!r} is inconsistent: {exc}") from exc
        self.set_state(state)


def has_weights(policy) -> bool:
    """False for a policy whose class leaves `get_weights` to the abstract `Policy` (a
    hand-coded one such as classic RLlib's RandomPolicy): it has no weights to move."""
    return getattr(type(policy), "get_weights", None) is not Policy.get_weights


def _to_jsonable(structure):
    if isinstance(structure, dict):
        return {"__dict__": {k: _to_jsonable(v) for k, v in structure.items()}}
    if isinstance(structure, (list, tuple)):
        return {"__list__": [_to_jsonable(v) for v in structure]}
    return None


def _from_jsonable(obj):
    if isinstance(obj, dict) and "__dict__" in obj:
        return {k: _from_jsonable(v) for k, v in obj["__dict__"].items()}
    if isinstance(obj, dict) and "__list__" in obj:
        return [_from_jsonable(v) for v in obj["__list__"]]
    return 0
