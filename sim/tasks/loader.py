"""The one reader of task YAMLs (config/tasks/velocity_<robot>.yaml): sections over default_task(robot), every
key checked, every error a SimError naming the file and the field.

A section that is absent keeps the default. `rewards` and `terminations` are edited term by term: a listed term
replaces the default's weight and merges its params, `name: null` drops a term, a new name adds one from the
registry (sim.tasks.terms). `observations` is the whole ordered list; `only_positive_rewards` is true or false.
`commands`, `reset`, `randomization` and `feet` set the fields they name. `terrain` is a sim.terrain.TerrainConfig
(edge.config checks its fields).

The generic part (a mapping onto a dataclass's fields, by the type of each default) is `_fields`: the place to
swap in the project's typed-dataclass loader once there is one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from edge.config import check_values, load_dataclass
from edge.fileio import read_yaml_mapping
from edge.resources import config_path
from sim.errors import RobotConfigError, SimError
from sim.randomization import RandomizationConfig
from sim.robot import CommandLimits, RobotSpec
from sim.tasks.config import (
    FeetConfig,
    ObservationTerm,
    RewardTerm,
    TerminationTerm,
    VelocityCommand,
    VelocityTaskConfig,
    check_task,
    default_task,
)
from sim.tasks.terms import OBSERVATIONS, REWARDS, TERMINATIONS
from sim.terrain import TerrainConfig

TASK_CONFIG_DIRS = (config_path("tasks"),)  # share/edge/config/tasks in an install
SECTIONS = (
    "observations",
    "rewards",
    "terminations",
    "commands",
    "episode_length_s",
    "only_positive_rewards",
    "reset",
    "randomization",
    "feet",
    "terrain",
)


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
    _known(raw, SECTIONS, src, "")
    cfg = default_task(robot)
    changes: dict[str, Any] = {}
    if "observations" in raw:
        changes["observations"] = _observations(raw["observations"], src)
    if "rewards" in raw:
        changes["rewards"] = _terms(raw["rewards"], cfg.rewards, REWARDS, ("weight", "params"), src, "rewards")
    if "terminations" in raw:
        changes["terminations"] = _terms(
            raw["terminations"], cfg.terminations, TERMINATIONS, ("params",), src, "terminations"
        )
    if "commands" in raw:
        changes["commands"] = _commands(raw["commands"], cfg, robot, src)
    if "episode_length_s" in raw:
        changes["episode_length_s"] = _number(raw["episode_length_s"], f"{src}: episode_length_s")
    if "only_positive_rewards" in raw:
        if not isinstance(raw["only_positive_rewards"], bool):
            raise SimError(f"{src}: only_positive_rewards must be true or false, got {raw['only_positive_rewards']!r}")
        changes["only_positive_rewards"] = raw["only_positive_rewards"]
    if "reset" in raw:
        changes["reset"] = _fields(cfg.reset, _mapping(raw["reset"], src, "reset"), src, "reset")
    if "randomization" in raw:
        changes["randomization"] = RandomizationConfig.from_dict(
            _mapping(raw["randomization"], src, "randomization"), f"{src}: randomization"
        )
    if "feet" in raw:
        feet = check_values(FeetConfig, _mapping(raw["feet"], src, "feet"), name=f"{src}: feet", error=SimError)
        changes["feet"] = dataclasses.replace(cfg.feet, **feet)
    if "terrain" in raw:
        changes["terrain"] = load_dataclass(
            TerrainConfig, _mapping(raw["terrain"], src, "terrain"), error=SimError, name=f"{src}: terrain"
        )
    return check_task(dataclasses.replace(cfg, **changes), robot, src)


def _observations(raw, src: str) -> dict[str, ObservationTerm]:
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise SimError(f"{src}: observations must be a list of term names, got {raw!r}")
    _registered(raw, OBSERVATIONS, src, "observation")
    return {name: ObservationTerm(OBSERVATIONS[name]) for name in raw}


def _terms(raw, base: dict, registry: dict, keys: tuple[str, ...], src: str, section: str) -> dict:
    """The section's terms: `base` edited by the YAML mapping `raw` (see the module docstring)."""
    raw = _mapping(raw, src, section)
    _registered(list(raw), registry, src, section[:-1])
    terms = dict(base)
    for name, entry in raw.items():
        if entry is None:
            terms.pop(name, None)
            continue
        where = f"{section}.{name}"
        entry = _mapping(entry, src, where)
        _known(entry, keys, src, where)
        old = terms.get(name)
        params = {**(old.params if old else {}), **_params(entry.get("params", {}), src, where)}
        if "weight" not in keys:
            terms[name] = TerminationTerm(registry[name], params)
        elif "weight" in entry:
            terms[name] = RewardTerm(registry[name], _number(entry["weight"], f"{src}: {where}.weight"), params)
        elif old is not None:
            terms[name] = RewardTerm(registry[name], old.weight, params)
        else:
            raise SimError(f"{src}: {where}: a new reward term needs a weight")
    return terms


def _commands(raw, cfg: VelocityTaskConfig, robot: RobotSpec, src: str) -> VelocityCommand:
    raw = dict(_mapping(raw, src, "commands"))
    ranges = raw.pop("ranges", None)
    commands = _fields(cfg.commands, raw, src, "commands", known=("resample_s", "stand_still_share", "ranges"))
    if ranges is None:
        return commands
    try:  # axes left out keep the robot's limits
        limits = CommandLimits.from_dict(ranges, f"{src}: commands.ranges", base=robot.command_limits)
    except RobotConfigError as e:
        raise SimError(str(e)) from None
    return dataclasses.replace(commands, ranges=limits)


def _fields(base, raw: dict, src: str, where: str, known: tuple[str, ...] | None = None):
    """`base`, a dataclass, with the number fields `raw` names (`known`: the keys allowed, default all fields)."""
    _known(raw, known or tuple(f.name for f in dataclasses.fields(base)), src, where)
    return dataclasses.replace(base, **{k: _number(v, f"{src}: {where}.{k}") for k, v in raw.items()})


def _params(raw, src: str, where: str) -> dict[str, float | tuple[float, ...]]:
    # every term of sim.tasks.terms takes numbers, or one number per joint (a list); others would need a reader here
    return {
        k: tuple(_number(x, f"{src}: {where}.params.{k}") for x in v)
        if isinstance(v, list)
        else _number(v, f"{src}: {where}.params.{k}")
        for k, v in _mapping(raw, src, f"{where}.params").items()
    }


def _mapping(raw, src: str, where: str) -> dict:
    if not isinstance(raw, dict):
        raise SimError(f"{src}: {where} must be a mapping, got {raw!r}")
    return raw


def _known(raw: dict, keys: tuple[str, ...], src: str, where: str) -> None:
    unknown = sorted(str(k) for k in set(raw) - set(keys))
    if unknown:
        at = f"{where}: " if where else ""
        raise SimError(f"{src}: {at}unknown key(s) {', '.join(unknown)}; known: {', '.join(keys)}")


def _registered(names: list[str], registry: dict, src: str, kind: str) -> None:
    unknown = [str(n) for n in names if n not in registry]
    if unknown:
        raise SimError(f"{src}: unknown {kind} term(s) {', '.join(unknown)}; known: {', '.join(registry)}")


def _number(value, where: str) -> float:
    # YAML 1.1 reads 1e-5 (no dot) as a string: float() takes it, and refuses what is not a number
    if isinstance(value, bool):
        raise SimError(f"{where} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise SimError(f"{where} must be a number, got {value!r}") from None
