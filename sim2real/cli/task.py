"""`sim2real task show`: a robot's effective velocity task, its reward and termination terms as tables, each term
marked by where it comes from. A task YAML states only what differs from sim.tasks.default_task, so this is where
the whole task can be read (as mjlab's RewardManager prints its active terms)."""

from __future__ import annotations

import argparse

HELP = "Show a robot's effective task: reward terms and weights, terminations, each marked default or overridden."
EXAMPLES = """examples:
  sim2real task show --robot quadruped                 # config/tasks/velocity_quadruped.yaml over the default
  sim2real task show --robot rover
  sim2real task show --robot go1.yaml                  # a robot of your own: its default task
  sim2real task show --robot quadruped --task my_task.yaml
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    # the action as a positional: `sim2real task show --robot X` reads as `sim2real robot init X` does
    p.add_argument(
        "action",
        choices=["show"],
        help="show: print each reward term's weight and parameters and each termination's parameters, marked "
        "'default' (sim.tasks.default_task's), 'overridden' (the task YAML changes it), 'added' (not a default "
        "term) or 'dropped' (a default term the YAML removes)",
    )
    p.add_argument("--robot", required=True, help="robot name (config/robots/NAME.yaml) or robot YAML path")
    p.add_argument(
        "--task", default=None, help="task YAML (default: the robot's own config/tasks/velocity_<robot>.yaml)"
    )


def term_rows(terms: dict, defaults: dict, weighted: bool) -> list[tuple[str, ...]]:
    """(name, [weight,] params, source) for each effective term, then each default term the task dropped."""
    rows = []
    for name, term in terms.items():
        default = defaults.get(name)
        source = "added" if default is None else "default" if term == default else "overridden"
        rows.append((name, *([f"{term.weight:g}"] if weighted else []), _params(term.params), source))
    rows += [(name, *(["-"] if weighted else []), "-", "dropped") for name in defaults if name not in terms]
    return rows


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from sim.robot import load_robot
    from sim.tasks import default_task, load_task, task_path

    robot = load_robot(args.robot)
    task, default = load_task(robot, args.task), default_task(robot)
    source = args.task or task_path(robot) or "no task YAML: the default task"
    console = Console()
    console.print(f"[bold]{robot.name}[/]: velocity task from {source}")
    clip = "only_positive_rewards: a step's negative total becomes 0" if task.only_positive_rewards else None
    rewards = Table(title="reward terms: func(state) x weight x control_dt", caption=clip)
    for column in ("term", "weight", "params", "source"):
        rewards.add_column(column, justify="right" if column == "weight" else "left")
    for row in term_rows(task.rewards, default.rewards, weighted=True):
        rewards.add_row(*row)
    terminations = Table(title="terminations: any one ends the episode")
    for column in ("term", "params", "source"):
        terminations.add_column(column)
    for row in term_rows(task.terminations, default.terminations, weighted=False):
        terminations.add_row(*row)
    console.print(rewards, terminations)
    return 0
