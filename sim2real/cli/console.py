"""The command line's consoles and its one progress bar.

    bar = progress_bar("percent", "remaining")  # on stderr
    with bar:
        task = bar.add_task("software in the loop (simulated s)", total=duration)
        bar.update(task, completed=t)

Every bar shows the task's description and the bar, then the columns a command names (COLUMNS). On a terminal it
redraws in place; without one (a pipe, nohup, CI) rich draws nothing while it runs and prints the final state once
when it stops, or nothing at all for a transient bar. rich is imported on first use, so `sim2real --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

PIPE_WIDTH = 110  # a pipe or CI log gets this many columns (rich's own default, 80, wraps the tables)
COLUMNS = ("percent", "steps", "info", "elapsed", "remaining")  # what a bar may show after its description and bar


def make_console(stderr: bool = False) -> Console:
    """A console on stdout (stderr): the terminal's width, or PIPE_WIDTH columns without a terminal."""
    from rich.console import Console

    return Console(stderr=stderr, width=None if Console(stderr=stderr).is_terminal else PIPE_WIDTH)


def progress_bar(*columns: str, console: Console | None = None, transient: bool = False) -> Progress:
    """The project's progress bar: the task's description, the bar, then `columns` in the order given: "percent"
    (done in percent), "steps" (done/total), "info" (the task's `info` field, given to add_task and update),
    "elapsed", "remaining" (time). It draws on `console` (default: stderr; a command passes the console it prints
    its own lines on); `transient`: the bar disappears when it stops."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown progress columns {unknown}: choose from {', '.join(COLUMNS)}")
    made = {
        "percent": TaskProgressColumn,
        "steps": MofNCompleteColumn,
        "info": lambda: TextColumn("{task.fields[info]}"),
        "elapsed": TimeElapsedColumn,
        "remaining": TimeRemainingColumn,
    }
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *(made[c]() for c in columns),
        console=console or make_console(stderr=True),
        transient=transient,
    )
