"""Schedules: values that change with the global timestep.

Used by the policy mixins (learning-rate and entropy-coefficient schedules, see
tfrl/policy/mixins.py) and by exploration (DQN's epsilon). A schedule is a plain picklable Python
object; `value(t)` is evaluated on the driver/actor side, never inside a traced function.
"""
from __future__ import annotations

import bisect
from typing import Sequence

from tfrl.errors import InvalidConfigError


class Schedule:
    """A function of the timestep. Subclasses implement `value(t)`."""

    def value(self, t: int) -> float:
        raise NotImplementedError

    def __call__(self, t: int) -> float:
        return self.value(t)


class ConstantSchedule(Schedule):
    """Always the same value."""

    def __init__(self, value: float):
        self._value = float(value)

    def value(self, t: int) -> float:
        return self._value


class LinearSchedule(Schedule):
    """Linear from `initial_p` at t=0 to `final_p` at `schedule_timesteps`, then constant.

    Raises:
        InvalidConfigError: if `schedule_timesteps` is not positive.
    """

    def __init__(self, schedule_timesteps: int, final_p: float, initial_p: float = 1.0):
        if schedule_timesteps <= 0:
            raise InvalidConfigError(
                f"LinearSchedule needs schedule_timesteps > 0, got {schedule_timesteps}; "
                "use ConstantSchedule for a fixed value.")
        self.schedule_timesteps = int(schedule_timesteps)
        self.final_p = float(final_p)
        self.initial_p = float(initial_p)

    def value(self, t: int) -> float:
        fraction = min(max(float(t), 0.0) / self.schedule_timesteps, 1.0)
        return self.initial_p + fraction * (self.final_p - self.initial_p)


class PiecewiseSchedule(Schedule):
    """Linear interpolation between `(t, value)` endpoints.

    Before the first endpoint and after the last, `outside_value` is returned; if it is None the
    nearest endpoint's value is held (the usual wish for learning-rate schedules).

    Raises:
        InvalidConfigError: if there are no endpoints or their timesteps do not increase.
    """

    def __init__(self, endpoints: Sequence[Sequence[float]], outside_value: float | None = None):
        try:
            points = [(int(t), float(v)) for t, v in endpoints]
        except (TypeError, ValueError) as exc:
            raise InvalidConfigError(
                f"PiecewiseSchedule endpoints must be [[timestep, value], ...], got {endpoints!r}"
            ) from exc
        if not points:
            raise InvalidConfigError(
                "PiecewiseSchedule needs at least one [timestep, value] endpoint.")
        times = [t for t, _ in points]
        if any(b <= a for a, b in zip(times, times[1:])):
            raise InvalidConfigError(
                f"PiecewiseSchedule endpoint timesteps must strictly increase, got {times}; "
                "sort the endpoints and remove duplicates.")
        self.endpoints = points
        self.outside_value = outside_value
        self._times = times

    def value(self, t: int) -> float:
        if t < self._times[0] or t > self._times[-1]:
            if self.outside_value is not None:
                return float(self.outside_value)
            return self.endpoints[0][1] if t < self._times[0] else self.endpoints[-1][1]
        i = bisect.bisect_right(self._times, t) - 1
        if i >= len(self.endpoints) - 1:
            return self.endpoints[-1][1]
        (t0, v0), (t1, v1) = self.endpoints[i], self.endpoints[i + 1]
        alpha = (t - t0) / (t1 - t0)
        return v0 + alpha * (v1 - v0)


def make_schedule(value: float, schedule: Sequence[Sequence[float]] | None) -> Schedule:
    """A PiecewiseSchedule from `schedule` if given, else a ConstantSchedule of `value`.

    Raises:
        InvalidConfigError: if `schedule` is malformed (see PiecewiseSchedule).
    """
    if schedule:
        return PiecewiseSchedule(schedule)
    return ConstantSchedule(value)


def epsilon_schedule_from_config(exploration_config: dict):
    """The LinearSchedule of epsilon (a constant if epsilon_timesteps is 0).

    Raises:
        InvalidConfigError: epsilons outside [0, 1] or negative epsilon_timesteps.
    """
    initial = float(exploration_config["initial_epsilon"])
    final = float(exploration_config["final_epsilon"])
    timesteps = int(exploration_config["epsilon_timesteps"])
    if not (0.0 <= initial <= 1.0 and 0.0 <= final <= 1.0):
        raise InvalidConfigError(
            f"exploration_config epsilons must be in [0, 1], got initial {initial}, final "
            f"{final}.")
    if timesteps < 0:
        raise InvalidConfigError(
            f"exploration_config epsilon_timesteps must be >= 0, got {timesteps}.")
    if timesteps == 0:
        return ConstantSchedule(final)
    return LinearSchedule(timesteps, final_p=final, initial_p=initial)
