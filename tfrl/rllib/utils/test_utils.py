"""Classic `ray.rllib.utils.test_utils`: the checks classic RLlib's tests and example scripts
end with (`check`, `check_learning_achieved`, `framework_iterator`)."""
from tfrl.utils.learning_checks import check, check_learning_achieved, framework_iterator

__all__ = ["check", "check_learning_achieved", "framework_iterator"]
