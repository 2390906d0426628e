"""The command line's one progress bar (sim2real.cli.console): the description and the bar, then the columns a
command names, on stderr unless the command passes its console; no other module of sim2real builds a rich bar."""

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from sim2real.cli.console import PIPE_WIDTH, make_console, progress_bar

ROOT = Path(__file__).resolve().parents[1]


def shown(bar) -> str:
    out = Console(file=io.StringIO(), width=100, color_system=None)
    out.print(bar.make_tasks_table(bar.tasks))
    return " ".join(out.file.getvalue().split())


def test_a_bar_shows_its_description_bar_and_named_columns_in_order():
    bar = progress_bar("steps", "info", "remaining")
    task = bar.add_task("SFT", total=10, info="")
    bar.update(task, completed=4, info="loss 0.500")
    assert re.fullmatch(r"SFT ━+ 4/10 loss 0\.500 -:--:--", shown(bar))
    bar = progress_bar("percent", "elapsed")
    bar.add_task("retrain", total=1.0, completed=0.25)
    assert re.fullmatch(r"retrain ━+ 25% 0:00:00", shown(bar))


def test_the_bar_draws_on_stderr_unless_given_a_console():
    assert progress_bar().console.stderr
    mine = make_console()
    bar = progress_bar("percent", console=mine, transient=True)
    assert bar.console is mine and bar.live.transient


def test_without_a_terminal_a_console_gets_a_readable_width():
    if Console().is_terminal:  # pytest -s on a terminal
        pytest.skip("stdout is a terminal")
    assert make_console().width == PIPE_WIDTH


def test_an_unknown_column_is_refused():
    with pytest.raises(ValueError, match="'eta'.*percent, steps"):
        progress_bar("eta")


def test_only_the_console_module_builds_rich_bars():
    builders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "sim2real").rglob("*.py"))
        if path.name != "console.py" and re.search(r"\bProgress\(|rich\.progress", path.read_text())
    ]
    assert not builders, builders
