"""Action adapter: from the policy's actions to what a rollout worker sends to its envs.

For Box action spaces, `normalize_actions` maps a policy acting in [-1, 1] onto the env's bounds
and `clip_actions` clips to the bounds (for a Tuple/Dict action space, each Box leaf of the
nest of actions, as classic RLlib did); the batch keeps the policy's own actions (the ones its
log-probabilities refer to), only the env sees the adapted ones. Whatever is sent to the env is
checked against the action space, one vectorised test per step for all envs.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tfrl import errors
from tfrl.env.checks import check_actions_in_space


class ActionAdapter:
    """Adapts and checks batches of actions for one action space.

    Raises (at construction):
      InvalidConfigError: normalize_actions for a Box space with infinite bounds.
    """

    def __init__(self, action_space: Any, env_name: str, clip_actions: bool = False,
                 normalize_actions: bool = False, check: bool = True):
        import gymnasium

        from tfrl.spaces.structure import flatten_space

        self.action_space = action_space
        self._leaf_adapters = None
        if isinstance(action_space, (gymnasium.spaces.Tuple, gymnasium.spaces.Dict)):
            # one adapter per leaf space, in the order tree.flatten gives the actions' leaves
            self._leaf_adapters = [
                ActionAdapter(leaf, env_name, clip_actions, normalize_actions, check=False)
                for leaf in flatten_space(action_space)]
        self.env_name = env_name
        self.is_box = isinstance(action_space, gymnasium.spaces.Box)
        self.is_discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        self.clip = bool(clip_actions) and self.is_box
        self.normalize = bool(normalize_actions) and self.is_box
        self.check = check
        if self.normalize and not (np.isfinite(action_space.low).all()
                                   and np.isfinite(action_space.high).all()):
            raise errors.InvalidConfigError(
                f"env {env_name!r}: normalize_actions=True needs finite action bounds, but the "
                f"action space is {action_space}; set normalize_actions=False")
        if self.is_box:
            self._low = action_space.low.astype(np.float64)
            self._high = action_space.high.astype(np.float64)

    def __call__(self, actions: Any) -> Any:
        """Returns the env-side batch of actions.

        Raises:
          ActionOutOfSpaceError: an action is outside the space after adaptation.
        """
        if self._leaf_adapters is not None:
            import tree

            leaves = tree.flatten(actions)
            if len(leaves) == len(self._leaf_adapters):
                actions = tree.unflatten_as(actions, [
                    adapt(leaf) for adapt, leaf in zip(self._leaf_adapters, leaves)])
        elif self.normalize:
            a = np.clip(np.asarray(actions, np.float64), -1.0, 1.0)
            actions = (self._low + (a + 1.0) * 0.5 * (self._high - self._low)).astype(
                self.action_space.dtype)
        elif self.clip:
            actions = np.clip(actions, self._low, self._high).astype(self.action_space.dtype)
        if self.check:
            check_actions_in_space(actions, self.action_space, self.env_name)
        return actions

    def env_action(self, actions: Any, index: int) -> Any:
        """The action of env `index` from an adapted batch (a Python int for Discrete)."""
        if self.is_discrete:
            return int(actions[index])
        if isinstance(actions, np.ndarray):
            return actions[index]
        import tree

        return tree.map_structure(lambda a: a[index], actions)
