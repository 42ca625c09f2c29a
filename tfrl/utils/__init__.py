"""Small helpers shared across tfrl: schedules (learning rates, coefficients, exploration) and
lz4 array packing (compression.py)."""
from tfrl.utils.schedules import (ConstantSchedule, LinearSchedule, PiecewiseSchedule, Schedule,
                                  make_schedule)

__all__ = ["Schedule", "ConstantSchedule", "LinearSchedule", "PiecewiseSchedule", "make_schedule"]
