"""Small helpers shared across tfrl: schedules for learning rates, coefficients and exploration."""
from tfrl.utils.schedules import (ConstantSchedule, LinearSchedule, PiecewiseSchedule, Schedule,
                                  make_schedule)

__all__ = ["Schedule", "ConstantSchedule", "LinearSchedule", "PiecewiseSchedule", "make_schedule"]
