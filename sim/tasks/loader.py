"""The one reader of task YAMLs (config/tasks/velocity_<robot>.yaml): sections over default_task(robot), checked by
edge.config against TaskSections, every error a SimError naming the file, the field and what it takes.

A section that is absent keeps the default. `rewards` and `terminations` are edited term by term: a listed term
replaces the default's weight and merges its params, `name: null` drops a term, a new name adds one from the
registry (sim.tasks.terms). `observations` is the whole ordered list; `only_positive_rewards` is true or false.
`commands`, `reset`, `randomization`, `feet` and `terrain` set the fields they name; `commands.ranges` narrows the
robot's command_limits axis by axis.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge.config import check_values, setting
from edge.errors import UserFixableError
from edge.fileio import read_yaml_mapping
from edge.resources import config_path
from sim.errors import SimError
from sim.randomization import RandomizationConfig
from sim.robot import CommandLimits, RobotSpec
from sim.tasks.config import (
    FeetConfig,
    ObservationTerm,
    ResetConfig,
    RewardTerm,
    TerminationTerm,
    VelocityTaskConfig,
    check_task,
    default_task,
)
from sim.tasks.terms import OBSERVATIONS, REWARDS, TERMINATIONS
from sim.terrain import TerrainConfig

TASK_CONFIG_DIRS = (config_path("tasks"),)  # share/edge/config/tasks in an install

# every term of sim.tasks.terms takes numbers, or one number per joint (a list)
Params = dict[str, float | tuple[float, ...]]


@dataclass(frozen=True)
class RewardEntry:
    """An entry of `rewards:` (null instead drops the term)."""

    weight: float | None = setting(None, "the term's weight; absent: the default term's (a new term needs one)")
    params: Params = setting({}, "merged over the default term's params: a number, or a list of one per joint")


@dataclass(frozen=True)
class TerminationEntry:
    """An entry of `terminations:` (null instead drops the term)."""

    params: Params = setting({}, "merged over the default term's params: a number, or a list of one per joint")


@dataclass(frozen=True)
class CommandsSection:
    """`commands:`, the VelocityCommand fields it names."""

    resample_s: float = setting(help="a new command every this many seconds of an episode, and at reset", gt=0)
    stand_still_share: float = setting(help="share of the command draws set to zero", ge=0, le=1)
    ranges: CommandLimits = setting(help="[low, high] per axis within the robot's; an axis left out keeps the robot's")


@dataclass(frozen=True)
class TaskSections:
    """What a task YAML may say, section by section, each an edit of default_task(robot) (the module docstring).
    Never built whole: `check_values` checks and converts the sections a file gives."""

    observations: list[str] = setting(
        help="the policy's input terms in order: the exported manifest's layout",
        choices=tuple(OBSERVATIONS),
        noun="observation term",
        unique=True,
    )
    rewards: dict[str, RewardEntry | None] = setting(
        help="term -> its weight and params, or null to drop it", choices=tuple(REWARDS), noun="reward term"
    )
    terminations: dict[str, TerminationEntry | None] = setting(
        help="term -> its params, or null to drop it", choices=tuple(TERMINATIONS), noun="termination term"
    )
    commands: CommandsSection = setting(help="the velocity command term")
    episode_length_s: float = setting(help="seconds after which an episode is truncated", gt=0)
    only_positive_rewards: bool = setting(help="legged_gym's clip of a step's negative total reward at zero")
    reset: ResetConfig = setting(help="the reset distribution")
    randomization: RandomizationConfig = setting(help="domain randomisation")
    feet: FeetConfig = setting(help="how the foot terms and gait KPIs read the feet")
    terrain: TerrainConfig = setting(help="the heightfield terrain; no types: the robot's own floor")


def task_path(robot: RobotSpec) -> Path | None:
    """The robot's velocity task YAML (velocity_<robot name>.yaml in the task config directories), if it has one."""
    for directory in TASK_CONFIG_DIRS:
        candidate = directory / f"velocity_{robot.name}.yaml"
        if candidate.is_file():
            return candidate
    return None


def load_task(robot: RobotSpec, path: str | Path | None = None) -> VelocityTaskConfig:
    """The velocity task for `robot` from `path`; without one, from the robot's own task YAML, and without that,
    default_task(robot)."""
    path = task_path(robot) if path is None else Path(path)
    if path is None:
        return check_task(default_task(robot), robot, f"default velocity task for robot {robot.name!r}")
    src = str(path)
    raw = read_yaml_mapping(path, SimError, "task config", "expected a mapping of task sections")
    sections = check_values(TaskSections, raw, name=src, error=SimError)
    return check_task(_apply(default_task(robot), sections, robot, src), robot, src)


def _apply(cfg: VelocityTaskConfig, sections: dict[str, Any], robot: RobotSpec, src: str) -> VelocityTaskConfig:
    """`cfg` with a task YAML's sections (as check_values gives them: typed, known names, in range) applied."""
    changes = dict(sections)  # episode_length_s and only_positive_rewards as they are
    if "observations" in sections:
        changes["observations"] = {name: ObservationTerm(OBSERVATIONS[name]) for name in sections["observations"]}
    for section, registry in (("rewards", REWARDS), ("terminations", TERMINATIONS)):
        if section in sections:
            changes[section] = _edit_terms(getattr(cfg, section), sections[section], registry, f"{src}: {section}")
    commands = sections.get("commands", {})
    if "ranges" in commands:  # axes left out keep the robot's limits
        ranges = _edit(robot.command_limits, commands["ranges"], f"{src}: commands.ranges")
        changes["commands"] = {**commands, "ranges": ranges}
    for section in ("commands", "reset", "randomization", "feet", "terrain"):
        if section in sections:
            changes[section] = _edit(getattr(cfg, section), changes[section], f"{src}: {section}")
    return dataclasses.replace(cfg, **changes)


def _edit_terms(terms: dict, entries: dict, registry: dict, where: str) -> dict:
    """`terms` with a section's entries: null drops a term, an entry sets its weight and merges its params."""
    terms = dict(terms)
    for name, entry in entries.items():
        if entry is None:
            terms.pop(name, None)
            continue
        old = terms.get(name)
        params = {**(old.params if old else {}), **entry.params}
        if isinstance(entry, TerminationEntry):
            terms[name] = TerminationTerm(registry[name], params)
            continue
        weight = entry.weight if entry.weight is not None else old.weight if old else None
        if weight is None:
            raise SimError(f"{where}.{name}: a new reward term needs a weight")
        terms[name] = RewardTerm(registry[name], weight, params)
    return terms


def _edit(base: Any, fields: dict[str, Any], where: str) -> Any:
    """`base`, a section of the default task, with the fields a YAML names; its own checks name the section."""
    try:
        return dataclasses.replace(base, **fields)
    except UserFixableError as e:
        raise SimError(f"{where}: {e}") from None
