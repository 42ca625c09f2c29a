"""ModelCatalog: picks the model, action distribution and preprocessor for a pair of spaces.

Policies call `ModelCatalog.get_action_dist` then `ModelCatalog.get_model` when they are built
(tfrl/policy/tf_policy.py). Model config keys (RLlib style) and their defaults are in
MODEL_DEFAULTS; unknown keys are rejected so typos do not pass silently. `custom_model` may be
a name registered with `register_custom_model` or the model class itself (picklable by
reference, so it also works in Ray actors). A registration is also written to Ray Tune's
registry, as classic RLlib's was, so the other processes of the Ray session (a Tune trial's
trainer, remote rollout workers) find the name too; without Ray it holds in this process.
"""
from __future__ import annotations

import functools
import logging
from typing import Dict

import gymnasium as gym

from tfrl.errors import InvalidConfigError, UnknownModelError, UnsupportedSpaceError
from tfrl.models import distributions
from tfrl.models.fcnet import FullyConnectedNetwork
from tfrl.models.classic_flat_actions import with_classic_flat_actions
from tfrl.models.multi_action_dist import (NESTED_ACTION_SPACES, MultiActionDistribution,
                                           multi_action_dist_for_space)
from tfrl.config.model import MODEL_DEFAULTS, merge_model_config  # noqa: F401 - re-exported
from tfrl.models.preprocessors import (CLASSIC_PREPROCESSED_SPACES, Preprocessor,
                                       classic_observation_space, get_preprocessor)
from tfrl.models.recurrent import LSTMWrapper
from tfrl.models.tf_model import TFModel
from tfrl.models.visionnet import VisionNetwork
from tfrl.utils.ray_registry import share_through_ray, shared_through_ray

logger = logging.getLogger(__name__)


class ModelCatalog:
    """Static registry and factory of models, distributions and preprocessors."""

    _custom_models: Dict[str, type] = {}
    _custom_action_dists: Dict[str, type] = {}

    @staticmethod
    def register_custom_model(name: str, model_class: type) -> None:
        """Make `model_class` (a TFModel subclass) available as model config `custom_model`.

        Raises:
            InvalidConfigError: if `model_class` is not a TFModel subclass.
        """
        if not (isinstance(model_class, type) and issubclass(model_class, TFModel)):
            raise InvalidConfigError(
                f"register_custom_model({name!r}, ...) needs a subclass of "
                f"tfrl.models.TFModel, got {model_class!r}.")
        ModelCatalog._custom_models[name] = model_class
        share_through_ray("rllib_model", name, model_class)

    @staticmethod
    def custom_model_class(custom) -> type:
        """The class a model config's `custom_model` (a registered name or a class) names.

        Raises:
            UnknownModelError: if `custom` names an unregistered model.
            InvalidConfigError: if it is not a TFModel subclass.
        """
        if isinstance(custom, str):
            _fetch_shared(ModelCatalog._custom_models, "rllib_model", custom)
            if custom not in ModelCatalog._custom_models:
                raise UnknownModelError(
                    f"custom_model {custom!r} is not registered in this process; call "
                    "ModelCatalog.register_custom_model(name, cls) first, or pass the "
                    "class itself as custom_model.")
            custom = ModelCatalog._custom_models[custom]
        if not (isinstance(custom, type) and issubclass(custom, TFModel)):
            raise InvalidConfigError(
                f"custom_model must be a TFModel subclass or a registered name, got "
                f"{custom!r}.")
        return custom

    @staticmethod
    def register_custom_action_dist(name: str, dist_class) -> None:
        """Make `dist_class` available as model config `custom_action_dist`."""
        ModelCatalog._custom_action_dists[name] = dist_class
        share_through_ray("rllib_action_dist", name, dist_class)

    @staticmethod
    def get_action_dist(action_space: gym.Space, config: Dict | None, dist_type=None):
        """(dist_class, num_outputs) for `action_space`.

        `dist_type` (or model config `dist_type`) selects among the distributions a space
        supports: "categorical", "multi_categorical", "diag_gaussian", "squashed_gaussian",
        "deterministic". A model config `custom_action_dist` wins over both (on a Tuple or
        Dict action space its `logp` gets the classic flat actions, classic_flat_actions.py).
        A Tuple or Dict action space gets a MultiActionDistribution over its leaves
        (`dist_type` choosing among the Box leaves' distributions), as classic RLlib's catalog
        did.

        Raises:
            UnsupportedSpaceError: if no distribution fits the space.
            UnknownModelError: if `custom_action_dist` names an unregistered distribution.
        """
        config = config or {}
        custom = config.get("custom_action_dist")
        if custom is not None:
            if isinstance(custom, str):
                _fetch_shared(ModelCatalog._custom_action_dists, "rllib_action_dist", custom)
                if custom not in ModelCatalog._custom_action_dists:
                    raise UnknownModelError(
                        f"custom_action_dist {custom!r} is not registered; call "
                        "ModelCatalog.register_custom_action_dist first.")
                custom = ModelCatalog._custom_action_dists[custom]
            size = distributions.required_output_size(custom, action_space, config)
            if isinstance(action_space, NESTED_ACTION_SPACES) and isinstance(custom, type) \
                    and not issubclass(custom, MultiActionDistribution):
                custom = with_classic_flat_actions(custom, action_space)
            return custom, size
        dist_type = dist_type or config.get("dist_type")
        if isinstance(action_space, NESTED_ACTION_SPACES):
            return multi_action_dist_for_space(action_space, dist_type)
        return distributions.action_dist_for_space(action_space, dist_type)

    @staticmethod
    def get_preprocessor(obs_space: gym.Space) -> Preprocessor:
        """A preprocessor instance for `obs_space`.

        Raises:
            UnsupportedSpaceError: if the space is not supported.
        """
        return get_preprocessor(obs_space)(obs_space)

    @staticmethod
    def get_preprocessor_for_space(observation_space: gym.Space, options: Dict | None = None
                                   ) -> Preprocessor:
        """Classic RLlib's name of `get_preprocessor`. `options` (a classic model config) is
        accepted and changes nothing: classic options shaped only its Atari image
        preprocessing, which tfrl's preprocessors do not do.

        Raises:
            UnsupportedSpaceError: if the space is not supported.
        """
        return ModelCatalog.get_preprocessor(observation_space)

    @staticmethod
    def get_model(obs_space: gym.Space, action_space: gym.Space, num_outputs: int,
                  model_config: Dict | None, name: str = "model", **model_kwargs) -> TFModel:
        """Build the model the config asks for (custom, vision, or fully connected; wrapped in
        an LSTM if `use_lstm`).

        A custom model is constructed as classic RLlib 1.x constructs it:
        `cls(obs_space, action_space, num_outputs, model_config, name, **kwargs)` with
        `model_kwargs` updated by the model config's `custom_model_config` (or its 0.8 name
        `custom_options`); a class whose constructor takes no such keywords is constructed
        with `model_kwargs` only and reads them from `model_config` itself.

        Raises:
            InvalidConfigError: on unknown config keys or a custom model that is not a TFModel.
            UnknownModelError: if `custom_model` names an unregistered model.
            UnsupportedSpaceError: if the observation space is not supported.
        """
        config = merge_model_config(model_config)
        custom = config["custom_model"]
        if custom is not None:
            custom = ModelCatalog.custom_model_class(custom)
            model_cls = functools.partial(_build_custom_model, custom,
                                          model_kwargs=model_kwargs)
        elif isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 3:
            model_cls = VisionNetwork
        elif isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 2:
            raise UnsupportedSpaceError(
                f"Observation space {obs_space!r} is rank 2: add a channel dimension for the "
                "vision network, or flatten it with a gymnasium FlattenObservation wrapper.")
        else:
            get_preprocessor(obs_space)  # raises on unsupported spaces
            model_cls = FullyConnectedNetwork
        if config["use_lstm"]:
            features = model_cls(obs_space, action_space, None, config, f"{name}_features")
            return LSTMWrapper(features, obs_space, action_space, num_outputs, config, name=name)
        return model_cls(obs_space, action_space, num_outputs, config, name)


def _build_custom_model(model_cls, obs_space, action_space, num_outputs, config, name, *,
                        model_kwargs) -> TFModel:
    """The custom model, its options passed as keywords where its constructor takes them.

    On a Discrete, Dict or Tuple observation space it is built, as classic RLlib built it, with
    the flat preprocessed space (`original_space` the env's) and reads classic inputs
    (`TFModel.use_classic_inputs`); the policy still hands it raw observations. On that flat
    space itself (the space of a policy the worker hands classic preprocessed observations)
    it is given the flat rows and reads the same classic inputs."""
    original = getattr(obs_space, "original_space", None)
    if original is not None:
        model = _construct_custom_model(model_cls, obs_space, action_space, num_outputs, config,
                                        name, model_kwargs)
        model.use_classic_inputs(original, preprocessed=True)
        return model
    classic = isinstance(obs_space, CLASSIC_PREPROCESSED_SPACES)
    model_space = classic_observation_space(obs_space) if classic else obs_space
    model = _construct_custom_model(model_cls, model_space, action_space, num_outputs, config,
                                    name, model_kwargs)
    if classic:
        model.use_classic_inputs(obs_space)
    return model


def _construct_custom_model(model_cls, obs_space, action_space, num_outputs, config, name,
                            model_kwargs) -> TFModel:
    options = dict(config.get("custom_options") or {})
    options.update(config.get("custom_model_config") or {})
    try:
        return model_cls(obs_space, action_space, num_outputs, config, name,
                         **dict(model_kwargs, **options))
    except TypeError as exc:
        # classic RLlib's rule: a constructor without these keywords reads the options from
        # model_config, so it is called again without them
        if not options or "unexpected keyword argument" not in str(exc):
            raise
    return model_cls(obs_space, action_space, num_outputs, config, name, **model_kwargs)


def _fetch_shared(registry: dict, category: str, name: str) -> None:
    """Adds to `registry` the value another process of the Ray session registered as `name`,
    when this process has none."""
    if name not in registry:
        shared = shared_through_ray(category, name)
        if shared is not None:
            registry[name] = shared
