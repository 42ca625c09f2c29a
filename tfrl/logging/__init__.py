"""Monitoring of training runs: TensorBoard summaries, JSON result logs and the live progress view."""
from tfrl.logging.progress import ProgressDisplay
from tfrl.logging.tensorboard import TensorBoardLogger, flatten_result

__all__ = ["ProgressDisplay", "TensorBoardLogger", "flatten_result"]
