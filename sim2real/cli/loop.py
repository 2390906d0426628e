"""`sim2real loop`: the whole three-computer loop on this machine, stage by stage, with a report.

Exit codes: 0 every stage ran (warnings allowed), 1 a stage failed (e.g. the campaign gate), 2 a usage error,
130 interrupted (re-run the same command to resume).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sim2real.errors import UserError

HELP = "Run the whole loop: train, export, validate, RLHF, deploy over ROS 2, analyse field logs, retrain, check."
EXAMPLES = """examples:
  sim2real loop                                  # rover, quick budget (about 15 min on 2 cores)
  sim2real loop --budget minimal                 # the CI-sized run (a few minutes; figures not meaningful)
  sim2real loop --robot quadruped --budget full
  sim2real loop --robot my_robot.yaml --out runs/my-loop
  sim2real loop --until validate                 # stop after the campaign gate
  sim2real loop --ray-address HEAD_IP:6379 --out /nfs/runs/loop-1   # heavy stages as Ray tasks (docs/cluster.md)

Re-running resumes the newest unfinished runs/loop-* of the same robot and budget (or --out DIR) after its last
finished stage; --fresh starts a new run. DIR/report.html holds every stage's verdict, figures and plots.
"""


# LoopConfig's fields a flag sets (out and until have flags of their own: a resumable default, the stage names)
FLAGS = (
    "robot",
    "budget",
    "field_twin",
    "duty",
    "instructions",
    "randomize",
    "rlhf_engine",
    "instruction_backend",
    "seed",
    "ray_address",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.config import add_flags
    from sim2real.loop.config import LoopConfig
    from sim2real.loop.stages import STAGE_NAMES

    add_flags(p, LoopConfig, FLAGS)
    p.add_argument("--out", help="run directory (default: resume the newest unfinished runs/loop-*, else a new one)")
    p.add_argument("--fresh", action="store_true", help="start a new run directory even if one can be resumed")
    p.add_argument("--until", choices=STAGE_NAMES, help="stop after this stage")


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from edge.config import flag_values
    from sim2real.cli.console import make_console, progress_bar
    from sim2real.library_logs import quiet_libraries
    from sim2real.loop.config import BUDGETS, LoopConfig
    from sim2real.loop.runner import REPORT_FILE, latest_unfinished, run_loop
    from sim2real.loop.stages import FAIL, STAGE_NAMES

    quiet_libraries()  # the stage lines and bars say what happens
    given = flag_values(args, LoopConfig, FLAGS)
    wanted = LoopConfig(**given, out="-")
    for path, flag in (
        (wanted.field_twin, "--field-twin"),
        (wanted.duty, "--duty"),
        (wanted.instructions, "--instructions"),
    ):
        if not Path(path).is_file():
            raise UserError(f"{flag}: no such file {path}")
    out = args.out or (None if args.fresh else latest_unfinished(Path("runs"), wanted))
    cfg = LoopConfig(**given, out=str(out or ""), until=args.until or "")
    console = make_console()
    console.print(
        f"[bold]sim2real loop[/]: {cfg.robot}, budget {cfg.budget}, run directory {cfg.out}"
        + (" (resuming)" if out and not args.out else "")
    )
    if cfg.ray_address:
        asks = "; ".join(f"{name} {r.describe()}" for name, r in BUDGETS[cfg.budget].resources.items())
        console.print(f"Ray cluster {cfg.ray_address}: each stage's task asks for {asks}; the others run here")
    current: dict = {"bar": None, "task": None}  # a stage's bar starts with its first progress report

    def announce(index: int, name: str, description: str, eta_s: float) -> None:
        console.rule(
            f"[bold]{index + 1}/{len(STAGE_NAMES)} {name}[/]: {description} (about {_minutes(eta_s)} left for the loop)"
        )

    def progress(fraction: float, note: str) -> None:  # the loop's fraction done; the note names the stage
        if current["bar"] is None:
            current["bar"] = progress_bar("percent", "elapsed", "remaining", console=console, transient=True)
            current["bar"].start()
            current["task"] = current["bar"].add_task(f"  {note}", total=1.0)
        current["bar"].update(current["task"], completed=min(max(fraction, 0.0), 1.0), description=f"  {note}")

    def stop_bar() -> None:
        if current["bar"] is not None:
            current["bar"].stop()
            current["bar"] = None

    def finished(name: str, result: dict, seconds: float) -> None:
        stop_bar()
        colour = {"pass": "green", "warn": "yellow", "fail": "red"}.get(result["verdict"], "white")
        where = f" on Ray node {result['ray_task']['node'][:12]}" if "ray_task" in result else ""
        console.print(f"[{colour}]{result['verdict'].upper()}[/] {name} ({seconds:.0f} s{where}): {result['figure']}")

    try:
        run = run_loop(cfg, announce, finished, progress)
    except KeyboardInterrupt:
        stop_bar()
        print(
            f"sim2real loop: interrupted; finished stages are kept in {cfg.out}: run the same command "
            f"(or --out {cfg.out}) to resume",
            file=sys.stderr,
        )
        return 130
    finally:
        stop_bar()
    table = Table(title=f"sim2real loop: {cfg.robot}, budget {cfg.budget}")
    for column in ("stage", "verdict", "key figure", "time"):
        table.add_column(column, justify="right" if column == "time" else "left")
    for name, r in run.results.items():
        table.add_row(name, r["verdict"], r["figure"], f"{run.seconds[name]:.0f} s")
    console.print(table)
    console.print(f"report: {Path(cfg.out) / REPORT_FILE}")
    return 1 if any(r["verdict"] == FAIL for r in run.results.values()) else 0


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
