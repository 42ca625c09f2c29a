"""Classic `ray.rllib.utils.tf_ops` (Ray 0.8.1 to 1.x)."""
from typing import Any, Callable

from tfrl.agents.dqn.dqn_policy import huber_loss
from tfrl.errors import NotSupportedError
from tfrl.utils.tf_ops import explained_variance


def make_tf_callable(session_or_none: Any, dynamic_shape: bool = False) -> Callable:
    """Classic RLlib's decorator making `fn(*args)` callable with numpy arguments in graph or
    eager mode. tfrl runs eagerly (`policy.get_session()` is None), so, as classic RLlib's eager
    branch, it returns `fn` itself, which TensorFlow ops call with numpy arrays alike.

    Raises:
      NotSupportedError: a TF1 session was given (tfrl has no graph mode).
    """
    if session_or_none is not None:
        raise NotSupportedError(
            "make_tf_callable: tfrl runs TensorFlow 2 eagerly and has no TF1 session; pass "
            "None (policy.get_session() returns None)")

    def make_wrapper(fn: Callable) -> Callable:
        return fn

    return make_wrapper


__all__ = ["explained_variance", "huber_loss", "make_tf_callable"]
