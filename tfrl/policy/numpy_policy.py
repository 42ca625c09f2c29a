"""NumpyPolicy: a remote rollout worker's policy without TensorFlow, until something needs it.

Where it sits: a rollout worker (tfrl/rollout) acts with its policies, estimates values and
postprocesses trajectories; the learner (tfrl/learner) trains the TensorFlow policy in the
driver. For the default fully connected policies (those `NumpyActor` reproduces: the catalog's
`FullyConnectedNetwork`, a `Categorical` or `DiagGaussian` distribution, no recurrent state, flat
Box observations) what a sampling-only worker needs is a few small matrix products. Importing
TensorFlow and building a TF policy costs a rollout process about three seconds of CPU, which on
a small machine the trainer's own start-up waits for. So `WorkerSet` (worker_set.py) hands its
remote workers a `NumpyPolicySpec` instead of the policy class when `numpy_rollout_workers` and
`numpy_actions` are on and `numpy_policy_spec` accepts the local worker's policy (with
several policies, every one of them). A `NumpyPolicy`:

- computes actions with the columns and dtypes of the TF policy's `compute_actions`
  (`action_logp`, `action_dist_inputs`, `vf_preds`), so rows and the replay signature are the
  same; actions follow the same distribution (not the same random draws);
- postprocesses with the policy's `postprocess_fn` and `postprocess_fragment_fn`
  (build_tf_policy's), given this object as the policy: the standard ones read only `config`
  and `compute_values`;
- takes and gives weights in the TF policy's `get_weights` order.

Anything else (gradients, learning, checkpoints, export, `model`) builds the TensorFlow policy
on first use, with the current weights, and is answered
by it. From then on the TF policy's weights are the truth: the numpy copy reads them again
after any access to the TF policy, before it next acts.

`NumpyStandIn` holds what every such stand-in shares (the TF policy on demand, weights, the
global timestep, the postprocessing hooks). A policy class whose acting NumpyActor does not
cover may bring a stand-in of its own by naming its spec function as `numpy_spec_fn`: DQN's
epsilon-greedy policy does (tfrl/agents/dqn/numpy_q_policy.py).
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

from tfrl.config.settings import Settings, setting
from tfrl.errors import CheckpointError, InvalidBatchError
from tfrl.runtime import configure_tf_threads
from tfrl.policy.numpy_actor import _ACTIVATIONS, NumpyActor, forward, log_likelihoods

# Policy methods whose code must be TFPolicy's own for the numpy copy to be exact.
_TFPOLICY_METHODS = ("compute_actions", "compute_values", "compute_log_likelihoods",
                     "extra_action_out", "action_sampler", "action_distribution",
                     "get_initial_state", "_forward_actions", "get_weights", "set_weights")


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyStandInSpec:
    """What a remote worker needs to stand in for a TF policy in numpy; picklable without
    TensorFlow. Calling it as a policy class, `spec(observation_space, action_space, config)`,
    returns its `stand_in` class's policy; RolloutWorker builds it so when the WorkerSet passes
    a spec as the policy.

    Attributes:
      class_name: the TF policy class's name.
      pickled_policy_class: that class as Ray would ship it to the worker (cloudpickle: by
        reference when importable, else by value); unpickled in the worker only when the TF
        policy is needed, as Ray would have unpickled the class itself at the worker's start.
      default_config: the TF policy class's `get_default_config()`.
      initial_weights: the local policy's weights when the spec was made.
      postprocess_fn: build_tf_policy's postprocess_fn, or None.
      postprocess_fragment_fn: build_tf_policy's postprocess_fragment_fn, or None.
    """

    class_name: str
    pickled_policy_class: bytes
    default_config: dict
    initial_weights: Tuple[np.ndarray, ...]
    postprocess_fn: Any
    postprocess_fragment_fn: Any

    # read by RolloutWorker: a worker whose policies are all specs starts no TensorFlow
    needs_tensorflow = False
    stand_in: ClassVar[type]

    @property
    def __name__(self) -> str:  # named like the class it stands for in workers' messages
        return f"{self.stand_in.__name__}({self.class_name})"

    def __call__(self, observation_space, action_space, config: Optional[dict] = None):
        return self.stand_in(self, observation_space, action_space, config)

    def policy_class(self) -> type:
        """The TF policy class this spec stands for (imports TensorFlow)."""
        from ray import cloudpickle

        # bytes the driver made for its own worker, passed through Ray like any actor argument
        return cloudpickle.loads(self.pickled_policy_class)


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyPolicySpec(NumpyStandInSpec):
    """A NumpyPolicy's spec (NumpyStandInSpec's attributes, and:)

    Attributes:
      pi_layers / vf_layers: (kernel index, bias index, activation name) of the policy and
        value trunks, input to output, indices into `get_weights()`.
      distribution: "categorical" or "diag_gaussian".
    """

    pi_layers: Tuple[Tuple[int, int, str], ...]
    vf_layers: Tuple[Tuple[int, int, str], ...]
    distribution: str


def could_act_in_numpy(policy_class: Any, model_config: Optional[dict]) -> bool:
    """A cheap check before any policy exists: True when a policy of `policy_class` with
    `model_config` may be one `numpy_policy_spec` accepts (so WorkerSet builds the local worker
    first to find out), False when it cannot be."""
    from tfrl.policy.tf_policy import TFPolicy

    if not (isinstance(policy_class, type) and issubclass(policy_class, TFPolicy)):
        return False
    model = model_config or {}
    if any(model.get(key) for key in ("custom_model", "use_lstm", "use_attention",
                                      "custom_action_dist")):
        return False
    # a policy class with a numpy stand-in of its own (e.g. DQN's) decides in its spec function
    return getattr(policy_class, "numpy_spec_fn", None) is not None or not any(
        getattr(policy_class, name) is not getattr(TFPolicy, name) for name in _TFPOLICY_METHODS)


def postprocess_hooks(cls: type) -> Optional[Dict[str, Any]]:
    """{"postprocess_fn": ..., "postprocess_fragment_fn": ...} of a TF policy class, each
    build_tf_policy's function or None where TFPolicy's own method runs; None when a hand-written
    method would run instead (it may use the TF policy's internals)."""
    hooks = {}
    for method, hook in (("postprocess_trajectory", "postprocess_fn"),
                         ("postprocess_fragment", "postprocess_fragment_fn")):
        definer = next(c for c in cls.__mro__ if method in c.__dict__)
        if "_build_kwargs" in definer.__dict__:
            hooks[hook] = definer._build_kwargs[hook]  # noqa: SLF001
        elif definer.__module__ not in ("tfrl.policy.tf_policy", "tfrl.policy.policy"):
            return None
        else:
            hooks[hook] = None
    return hooks


def numpy_policy_spec(policy: Any) -> Optional[NumpyStandInSpec]:
    """The numpy stand-in's spec of a built TF `policy` (a NumpyPolicySpec, or what the policy
    class's `numpy_spec_fn` makes), or None when a numpy copy would not be exact (see the
    module docstring)."""
    from ray import cloudpickle

    cls = type(policy)
    if not could_act_in_numpy(cls, policy.config.get("model")):
        return None
    own_spec_fn = getattr(cls, "numpy_spec_fn", None)
    if own_spec_fn is not None:
        return own_spec_fn(policy)
    # the same eligibility as NumpyActor's: the catalog's FC network, no recurrent state, a
    # categorical or diagonal Gaussian distribution
    found = NumpyActor._read_policy(policy)  # noqa: SLF001
    if found is None:
        return None
    obs_space, act_space = policy.observation_space, policy.action_space
    if not (is_flat_box(obs_space) and (isinstance(act_space, gym.spaces.Discrete)
                                         or is_flat_box(act_space))):
        return None
    model = policy.model
    hooks = postprocess_hooks(cls)
    if hooks is None:
        return None
    hidden = range(len(model.model_config["fcnet_hiddens"]))
    pi_layers = dense_layer_indices(model.base_model, policy.model_variables,
                                    [f"fc_{i}" for i in hidden] + ["fc_out"])
    value_prefix = "fc" if model.model_config["vf_share_layers"] else "fc_value"
    vf_layers = dense_layer_indices(model.base_model, policy.model_variables,
                                    [f"{value_prefix}_{i}" for i in hidden] + ["value_out"])
    if pi_layers is None or vf_layers is None:
        return None
    return NumpyPolicySpec(
        class_name=cls.__qualname__, pickled_policy_class=cloudpickle.dumps(cls),
        default_config=copy.deepcopy(cls.get_default_config()), pi_layers=pi_layers,
        vf_layers=vf_layers, distribution=found[2],
        initial_weights=tuple(policy.get_weights()), **hooks)


def dense_layer_indices(keras_model: Any, variables: Sequence[Any], layer_names: Sequence[str]
                        ) -> Optional[Tuple[Tuple[int, int, str], ...]]:
    """(kernel index, bias index, activation name) of each named dense layer of `keras_model`,
    input to output, the indices into `variables` (a model's variables in `get_weights` order);
    None when a layer's activation has no numpy form or its variables are not among them."""
    index = {v.name.split(":")[0]: i for i, v in enumerate(variables)}
    layers = []
    for name in layer_names:
        activation = getattr(keras_model.get_layer(name).activation, "__name__", None)
        if (activation not in _ACTIVATIONS or f"{name}/kernel" not in index
                or f"{name}/bias" not in index):
            return None
        layers.append((index[f"{name}/kernel"], index[f"{name}/bias"], activation))
    return tuple(layers)


def dense_layers(weights: Sequence[np.ndarray], indices: Sequence[Tuple[int, int, str]]) -> list:
    """The (kernel, bias, activation function) layers `forward` takes, from weights in
    `get_weights` order and `dense_layer_indices`' indices."""
    return [(weights[k], weights[b], _ACTIVATIONS[a]) for k, b, a in indices]


def is_flat_box(space) -> bool:
    """A rank-1 floating Box: observations a numpy stand-in takes as they are."""
    return (isinstance(space, gym.spaces.Box) and len(space.shape) == 1
            and np.issubdtype(space.dtype, np.floating))


@dataclasses.dataclass(frozen=True)
class StandInSettings(Settings):
    """The config key a numpy stand-in reads when it builds its TF policy."""

    tf_threads_per_worker: Optional[int] = setting(
        "TensorFlow intra- and inter-op threads of a remote worker's process (None or 0: "
        "TensorFlow's default)", minimum=0)


class NumpyStandIn:
    """What every numpy stand-in of a TF policy shares (module docstring): its TF policy on
    demand, weights in the TF policy's `get_weights` order, the global timestep, and
    postprocessing with the policy's build_tf_policy hooks. Subclasses act (`compute_actions`)
    and keep their numpy form of the weights in `_load_weights`."""

    acts_in_numpy = True  # read by the env runner: no TF call per fragment either
    # it stands in for a TFPolicy, which preprocesses its raw observations itself (a lookup
    # falling through to __getattr__ would build the TF policy the stand-in exists to avoid)
    preprocesses_observations = True
    # stand-ins are made for feed-forward models only, which never read them
    reads_prev_action_reward = False

    def __init__(self, spec: NumpyStandInSpec, observation_space, action_space,
                 config: Optional[dict] = None):
        self._spec = spec
        self._given_config = dict(config or {})
        merged = copy.deepcopy(spec.default_config)
        merged.update(self._given_config)
        self.config = merged
        self.observation_space = observation_space
        self.action_space = action_space
        self.global_timestep = 0
        self._obs_size = int(np.prod(observation_space.shape))
        self._tf = None
        self._rng = np.random.default_rng(merged.get("seed"))  # kept across weights
        self._weights: Optional[List[np.ndarray]] = None
        self._set_own_weights(spec.initial_weights)

    # --- the TensorFlow policy, on demand ------------------------------------------------------
    @property
    def tf_policy(self):
        """The TensorFlow policy (built at first use with the current weights and timestep)."""
        if self._tf is None:
            # as a remote worker with a TF policy configures them at its start
            configure_tf_threads(StandInSettings.from_config(self.config).tf_threads_per_worker)
            if self.config.get("seed") is not None:
                import tensorflow as tf

                tf.random.set_seed(self.config["seed"])
            policy = self._spec.policy_class()(
                self.observation_space, self.action_space, self._given_config)
            policy.set_weights(self._current_weights())
            policy.global_timestep = self.global_timestep
            self._hand_over_state(policy)
            self._tf = policy
        return self._tf

    def _hand_over_state(self, tf_policy) -> None:
        """Gives a newly built TF policy what the stand-in keeps besides weights and timestep."""

    def __getattr__(self, name: str):
        # only for names this class lacks; dunder lookups (copy, pickle) must not build TF
        if name.startswith("__") or "_spec" not in self.__dict__:
            raise AttributeError(name)
        value = getattr(self.tf_policy, name)
        self._weights = None  # whatever is done through it may change the weights
        return value

    def _current_weights(self) -> List[np.ndarray]:
        if self._weights is None:
            self._read_tf_policy(self._tf)
        return self._weights

    def _read_tf_policy(self, tf_policy) -> None:
        """Takes the weights (and whatever else the stand-in keeps) from the TF policy, the
        truth once it exists."""
        self._set_own_weights(tf_policy.get_weights())

    def _set_own_weights(self, weights: Sequence[np.ndarray]) -> None:
        self._weights = [np.asarray(w, np.float32) for w in weights]
        self._load_weights()

    def _load_weights(self) -> None:
        """Rebuilds the numpy form of `self._weights`."""
        raise NotImplementedError

    # --- weights and global variables -----------------------------------------------------------
    def get_weights(self) -> List[np.ndarray]:
        """The weights in the TF policy's `get_weights` order."""
        return [w.copy() for w in self._current_weights()]

    def set_weights(self, weights) -> None:
        """Takes weights from a TF policy's `get_weights`.

        Raises:
          CheckpointError: their number or shapes do not match the policy's.
        """
        self._check_shapes(weights, self._spec.initial_weights, "weights")
        if self._tf is not None:
            self._tf.set_weights(weights)
        self._set_own_weights(weights)

    def _check_shapes(self, weights, expected_like, what: str) -> None:
        expected = [w.shape for w in expected_like]
        got = [np.shape(w) for w in weights]
        if got != expected:
            raise CheckpointError(
                f"{self._spec.class_name}: got {len(got)} {what} of shapes {got}, the model "
                f"has {len(expected)} of shapes {expected}; pass the {what} of a policy with "
                "the same model config")

    def on_global_var_update(self, global_vars: Dict) -> None:
        self.global_timestep = int(global_vars.get("timestep", self.global_timestep))
        if self._tf is not None:
            self._tf.on_global_var_update(global_vars)

    # --- acting ---------------------------------------------------------------------------------
    def get_initial_state(self) -> list:
        return []

    def is_recurrent(self) -> bool:
        return False

    def num_state_tensors(self) -> int:
        return 0

    def _flat_obs(self, obs_batch) -> np.ndarray:
        obs = np.asarray(obs_batch, np.float32)
        if obs.ndim < 1 or obs.size != len(obs) * self._obs_size:
            raise InvalidBatchError(
                f"{self._spec.class_name}: observations of shape {obs.shape} do not match the "
                f"observation space {self.observation_space} with a leading batch dimension")
        return obs.reshape(len(obs), self._obs_size)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs):
        raise NotImplementedError

    def compute_single_action(self, obs, state=None, explore=None, timestep=None):
        """One action for one observation: (action, [], extra_fetches)."""
        actions, _, extras = self.compute_actions(np.asarray(obs)[None], explore=explore,
                                                  timestep=timestep)
        return actions[0], [], {k: v[0] for k, v in extras.items()}

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        fn = self._spec.postprocess_fn
        return sample_batch if fn is None else fn(self, sample_batch, other_agent_batches,
                                                  episode)

    def postprocess_fragment(self, batch):
        fn = self._spec.postprocess_fragment_fn
        return batch if fn is None else fn(self, batch)

    def __repr__(self) -> str:
        state = "with its TensorFlow policy built" if self._tf is not None else "numpy only"
        return f"{type(self).__name__}({self._spec.class_name}, {state})"


class NumpyPolicy(NumpyStandIn):
    """A TF policy's acting, value and postprocessing parts in numpy (module docstring); its
    policy trunk and draws are a `NumpyActor`'s."""

    def _load_weights(self) -> None:
        self._actor = NumpyActor(None, dense_layers(self._weights, self._spec.pi_layers),
                                 self._spec.distribution, self._rng, flat_observations=True)
        self._vf = dense_layers(self._weights, self._spec.vf_layers)

    def _distribution_inputs(self, x: np.ndarray) -> np.ndarray:
        self._current_weights()  # read again from the TF policy if it may have changed them
        return self._actor.batch_distribution_inputs(x)

    def _values(self, x: np.ndarray) -> np.ndarray:
        self._current_weights()
        return forward(self._vf, x)[:, 0].astype(np.float32)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs):
        """(actions, [], extras) as the TF policy's compute_actions returns them: int64 [B] or
        float32 [B, dim] actions; action_logp, action_dist_inputs and vf_preds as float32.

        Raises:
          InvalidBatchError: observations that do not fit the observation space.
        """
        explore = self.config["explore"] if explore is None else bool(explore)
        x = self._flat_obs(obs_batch)
        inputs = self._distribution_inputs(x)
        actions = self._actor.draw(inputs, explore)
        self.global_timestep += len(x)
        extras = {"action_logp": self._logp(inputs, actions),
                  "action_dist_inputs": inputs.astype(np.float32),
                  "vf_preds": self._values(x)}
        return actions, [], extras

    def _logp(self, inputs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return log_likelihoods(self._spec.distribution, inputs, actions)

    def compute_values(self, obs_batch, state_batches=None) -> np.ndarray:
        """Value estimates [B] (float32) for raw observations."""
        return self._values(self._flat_obs(obs_batch))

    def value(self, obs_batch, state_batches=None) -> np.ndarray:
        return self.compute_values(obs_batch, state_batches)

    _value = value

    def compute_log_likelihoods(self, actions, obs_batch) -> np.ndarray:
        """log pi(actions | obs) [B] under the policy's action distribution."""
        return self._logp(self._distribution_inputs(self._flat_obs(obs_batch)), actions)


NumpyPolicySpec.stand_in = NumpyPolicy
