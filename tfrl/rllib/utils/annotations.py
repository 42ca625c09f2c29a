"""Classic `ray.rllib.utils.annotations`: the decorators classic code marks its methods with.

tfrl has no API-stability markers of its own; these keep classic code importable and keep
`override`'s check (the method must exist in the named parent class)."""
from typing import Callable


def override(cls: type) -> Callable:
    """Marks a method as overriding one of `cls`.

    Raises:
      NameError: `cls` has no method of that name (a typo or a renamed method).
    """
    def check_override(method: Callable) -> Callable:
        if method.__name__ not in dir(cls):
            raise NameError(f"{method.__name__} does not override any method of {cls.__name__}")
        return method
    return check_override


def PublicAPI(obj):  # noqa: N802 - classic name
    """Marks a public API (no effect)."""
    return obj


def DeveloperAPI(obj):  # noqa: N802 - classic name
    """Marks a developer API (no effect)."""
    return obj


__all__ = ["override", "PublicAPI", "DeveloperAPI"]
