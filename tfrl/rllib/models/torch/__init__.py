"""Classic `ray.rllib.models.torch` as classic RLlib has it without torch: the torch model classes
import (modules pick them by a `--torch` flag) and refuse construction with
FrameworkNotAvailableError (an ImportError); tfrl runs TensorFlow only."""
