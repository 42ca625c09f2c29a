"""Classic `ray.rllib.agents.marwil`: MARWILTrainer, BCTrainer (Ray 1.x), DEFAULT_CONFIG."""
from tfrl.agents.marwil import BC_DEFAULT_CONFIG, DEFAULT_CONFIG, BCTrainer, MARWILTFPolicy, MARWILTrainer
from tfrl.rllib.agents.marwil.marwil_torch_policy import MARWILTorchPolicy

__all__ = ["DEFAULT_CONFIG", "BC_DEFAULT_CONFIG", "MARWILTrainer", "BCTrainer", "MARWILTFPolicy", "MARWILTorchPolicy"]
