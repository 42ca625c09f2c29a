"""`FlexDict`: a gymnasium Dict space whose entries may be added after construction and keep
their order (classic RLlib's `utils.spaces.flexdict.FlexDict`)."""
from __future__ import annotations

from typing import Any, Optional

import gymnasium

from tfrl import errors


class FlexDict(gymnasium.spaces.Dict):
    """A Dict space built empty or from a dict (or keyword arguments) and filled in later with
    `space[key] = child`; entries keep insertion order.

    Raises:
      UnsupportedSpaceError: both a dict and keyword arguments are given, or an entry is not a
        gymnasium space.
    """

    def __init__(self, spaces: Optional[dict] = None, seed: Optional[int] = None,
                 **spaces_kwargs: gymnasium.Space):
        if spaces is not None and spaces_kwargs:
            raise errors.UnsupportedSpaceError(
                "FlexDict takes either a dict of spaces or keyword arguments, not both")
        spaces = dict(spaces if spaces is not None else spaces_kwargs)
        for key, space in spaces.items():
            _check_space(key, space)
        super().__init__(spaces, seed=seed)
        # gymnasium sorts the keys of a plain dict; a FlexDict keeps the order it was given
        self.spaces = dict(spaces)

    def __setitem__(self, key: Any, space: gymnasium.Space) -> None:
        _check_space(key, space)
        self.spaces[key] = space

    def __repr__(self) -> str:
        return "FlexDict(" + ", ".join(f"{k}:{s}" for k, s in self.spaces.items()) + ")"


def _check_space(key: Any, space: Any) -> None:
    if not isinstance(space, gymnasium.Space):
        raise errors.UnsupportedSpaceError(
            f"FlexDict entry {key!r} must be a gymnasium space, got {space!r}")
