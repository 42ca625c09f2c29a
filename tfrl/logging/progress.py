"""Live progress view of a training run (rich), one row per iteration: in the terminal, or in a
log file when the output is redirected."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from rich.console import Console
from rich.table import Table


def _fmt(value: Optional[float], spec: str) -> str:
    if value is None or value != value:  # None or NaN: no episode finished yet
        return "-"
    return format(value, spec)


class ProgressDisplay:
    """Prints a header once, then a row per training result: reward, env steps, steps/s, elapsed."""

    COLUMNS = ("iter", "reward mean", "reward min/max", "episodes", "env steps", "steps/s", "elapsed s")
    COLUMN_WIDTH = 12
    # every column at its width plus rich's one space of padding on each side
    ROW_WIDTH = len(COLUMNS) * (COLUMN_WIDTH + 2)

    def __init__(self, console: Optional[Console] = None, title: str = ""):
        self.console = console or self.default_console(self.ROW_WIDTH)
        self.title = title
        self._printed_header = False

    def update(self, result: Mapping[str, Any]) -> None:
        table = Table(show_header=not self._printed_header, title=None if self._printed_header else self.title,
                      box=None, pad_edge=False)
        for name in self.COLUMNS:
            table.add_column(name, justify="right", min_width=self.COLUMN_WIDTH, no_wrap=True)
        iter_time = result.get("time_this_iter_s") or 0.0
        steps_per_s = result.get("timesteps_this_iter", 0) / iter_time if iter_time > 0 else None
        table.add_row(
            str(result.get("training_iteration", "-")),
            _fmt(result.get("episode_reward_mean"), ".1f"),
            f"{_fmt(result.get('episode_reward_min'), '.0f')}/{_fmt(result.get('episode_reward_max'), '.0f')}",
            str(result.get("episodes_this_iter", "-")),
            str(result.get("timesteps_total", "-")),
            _fmt(steps_per_s, ".0f"),
            _fmt(result.get("time_total_s"), ".1f"),
        )
        self._printed_header = True
        self.console.print(table)

    def message(self, text: str) -> None:
        self.console.print(text)

    @staticmethod
    def default_console(width: int) -> Console:
        """A console on stdout: the terminal's width, or, when stdout is a file or a pipe (a log),
        at least `width`, where rich would take 80 columns (or $COLUMNS) and cut the last columns
        (steps/s, elapsed) off. A log file has no width of its own to respect."""
        console = Console()
        if console.is_terminal or console.width >= width:
            return console
        return Console(width=width)
