"""Classic `ray.rllib.utils.schedules`."""
from tfrl.utils.schedules import ConstantSchedule, LinearSchedule, PiecewiseSchedule, Schedule

__all__ = ["Schedule", "ConstantSchedule", "LinearSchedule", "PiecewiseSchedule"]
