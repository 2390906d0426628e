"""Campaign YAML (config/campaigns/<name>.yaml) -> CampaignConfig: the scenario axes, command sequences, terrains,
seeds, episode length and acceptance gates of one validation campaign. Unknown keys and bad values fail with one line
naming the key. See docs/campaigns.md for the reference."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge.config import load_dataclass
from edge.fileio import read_yaml_mapping
from edge.resources import config_path
from edge.runtime import BACKENDS as RUNTIMES
from sim.backends import BACKENDS
from sim.errors import CampaignError
from sim.kpis import DESCRIPTIVE_KPIS, KPI_NAMES
from sim.terrain import TerrainConfig

CAMPAIGN_DIRS = (config_path("campaigns"),)

# axis -> (nominal value, check, what it means). Physical axes vary per env inside one twin; obs_noise and
# push_velocity are twin-wide settings (RandomizationConfig), so scenarios are batched by them.
AXES = {
    "friction": (1.0, lambda v: v > 0, "sliding friction coefficient of every contact"),
    "payload_kg": (0.0, np.isfinite, "mass added to the base body (kg; negative removes mass)"),
    "motor_strength": (1.0, lambda v: v > 0, "scales PD torque and the torque limit (0.8 = a 20% weaker motor)"),
    "kp_scale": (1.0, lambda v: v > 0, "scales the PD stiffness"),
    "kd_scale": (1.0, lambda v: v > 0, "scales the PD damping"),
    "latency_s": (0.0, lambda v: v >= 0, "actuation delay (s), resolved to physics steps"),
    "obs_noise": (0.0, lambda v: v >= 0, "multiplies each observation term's uniform noise width"),
    "push_velocity": (0.0, lambda v: v >= 0, "base xy velocity change of a push every push_interval_s (m/s)"),
}
TWIN_AXES = ("obs_noise", "push_velocity")
COMMAND_AXIS = "commands"  # values are names of command sequences
DEFAULT_COMMANDS = {"forward": ["forward"]}  # half the robot's vx limit for the whole episode
TERRAIN_AXIS = "terrain"  # values are names of `terrains` entries; a twin-wide setting, so batched by it too
NAMED_AXES = (COMMAND_AXIS, TERRAIN_AXIS)


@dataclass(frozen=True)
class GateConfig:
    """An episode fails when any KPI exceeds its limit in `kpis`; the campaign fails when the failing fraction
    of episodes exceeds `failure_rate` overall, or at any single value of any axis (`per_axis` overrides)."""

    kpis: dict = field(default_factory=lambda: {"falls": 0})
    failure_rate: float = 0.0
    per_axis: dict = field(default_factory=dict)

    def axis_rate(self, axis: str) -> float:
        return float(self.per_axis.get(axis, self.failure_rate))


@dataclass(frozen=True)
class CampaignConfig:
    name: str = "campaign"
    robot: str | None = None  # None: the artifact's robot (manifest robot.name)
    backend: str = "mujoco"
    runtime: str = "auto"  # edge.runtime.load_policy backend: auto, onnxruntime, tensorrt
    episode_s: float = 5.0
    seeds: tuple[int, ...] = (0,)  # replicates: each seed re-runs every scenario with other initial states
    batch_size: int = 64  # envs per BatchedTwin (one Ray task)
    push_interval_s: float = 2.0
    settle_s: float = 0.5  # tracking error skips this long after each command change
    axes: dict = field(default_factory=lambda: {COMMAND_AXIS: ["forward"]})  # axis -> list of values
    commands: dict = field(default_factory=lambda: dict(DEFAULT_COMMANDS))  # name -> list of segments
    terrains: dict = field(default_factory=dict)  # name -> sim.terrain.TerrainConfig (no types: the robot's floor)
    gates: GateConfig = field(default_factory=GateConfig)

    def sim_sha256(self) -> str:
        """Hash of everything that changes simulated results (not the gates: re-gating needs no re-run)."""
        d = dataclasses.asdict(self)
        for key in ("gates", "name"):
            d.pop(key)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


def resolve_campaign_path(name_or_path: str | Path) -> Path:
    """`quick` -> config/campaigns/quick.yaml; an existing path is used as it is."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise CampaignError(f"campaign file {p} does not exist")
        return p
    for directory in CAMPAIGN_DIRS:
        if (directory / f"{p}.yaml").is_file():
            return directory / f"{p}.yaml"
    known = sorted({q.stem for d in CAMPAIGN_DIRS for q in d.glob("*.yaml")})
    raise CampaignError(f"unknown campaign {name_or_path!r}; known: {', '.join(known)} (or pass a .yaml path)")


def _number(value, key: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise CampaignError(f"{key} must be a number, got {value!r}") from None
    if not np.isfinite(v):
        raise CampaignError(f"{key} must be finite, got {value!r}")
    return v


def _mapping(value, key: str) -> dict:
    """A YAML mapping (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CampaignError(f"{key} must be a mapping, got {value!r}")
    return value


def _integer(value, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CampaignError(f"{key} must be an integer, got {value!r}")
    return value


def _gates(raw, src: str) -> GateConfig:
    raw = _mapping(raw, f"{src}: gates")
    unknown = sorted(set(raw) - {"kpis", "failure_rate", "per_axis"})
    if unknown:
        raise CampaignError(f"{src}: unknown gates key(s) {', '.join(unknown)}")
    kpis = {str(k): _number(v, f"{src}: gates.kpis.{k}") for k, v in _mapping(raw.get("kpis"), "gates.kpis").items()}
    bad = sorted(set(kpis) - set(KPI_NAMES))
    if bad:
        raise CampaignError(f"{src}: unknown KPI(s) {', '.join(bad)} in gates.kpis; known: {', '.join(KPI_NAMES)}")
    described = [k for k in kpis if k in DESCRIPTIVE_KPIS]
    if described:
        raise CampaignError(
            f"{src}: gates.kpis {', '.join(described)} describe the gait (a gate is an upper limit): gate "
            "foot_slip_m_s or cost_of_transport instead"
        )
    rate = _number(raw.get("failure_rate", 0.0), f"{src}: gates.failure_rate")
    per_axis = {
        str(k): _number(v, f"{src}: gates.per_axis.{k}")
        for k, v in _mapping(raw.get("per_axis"), f"{src}: gates.per_axis").items()
    }
    if not all(0 <= r <= 1 for r in [rate, *per_axis.values()]):
        raise CampaignError(f"{src}: failure rates must lie in [0, 1]")
    return GateConfig(kpis=kpis, failure_rate=rate, per_axis=per_axis)


def _terrains(raw, src: str) -> dict[str, TerrainConfig]:
    """name -> TerrainConfig, each checked by edge.config; an entry with no types is the robot's own floor."""
    out = {}
    for name, entry in _mapping(raw, f"{src}: terrains").items():
        where = f"{src}: terrains.{name}"
        out[str(name)] = load_dataclass(TerrainConfig, _mapping(entry, where), error=CampaignError, name=where)
    return out


def _axes(raw, commands: dict, terrains: dict, src: str) -> dict:
    if not isinstance(raw, dict) or not raw:
        raise CampaignError(f"{src}: axes must map axis names to lists of values")
    named = {COMMAND_AXIS: (commands, "command sequence", "commands"), TERRAIN_AXIS: (terrains, "terrain", "terrains")}
    out = {}
    for axis, values in raw.items():
        values = values if isinstance(values, list) else [values]
        if not values or len(set(map(str, values))) != len(values):
            raise CampaignError(f"{src}: axes.{axis} must list distinct values, got {values!r}")
        if axis in named:
            names, what, section = named[axis]
            if not all(isinstance(v, str) for v in values):
                raise CampaignError(f"{src}: axes.{axis} must list {what} names, got {values!r}")
            missing = [v for v in values if v not in names]
            if missing:
                raise CampaignError(f"{src}: {what}(s) {', '.join(map(str, missing))} not in {section}")
            out[axis] = [str(v) for v in values]
            continue
        if axis not in AXES:
            raise CampaignError(f"{src}: unknown axis {axis!r}; known: {', '.join([*AXES, *NAMED_AXES])}")
        check = AXES[axis][1]
        nums = [_number(v, f"{src}: axes.{axis}") for v in values]
        if not all(check(v) for v in nums):
            raise CampaignError(f"{src}: axes.{axis} holds an invalid value ({AXES[axis][2]}): {values}")
        out[axis] = nums
    out.setdefault(COMMAND_AXIS, [next(iter(commands))])
    return out


def campaign_from_dict(raw: dict, src: str = "campaign") -> CampaignConfig:
    from sim.campaign.commands import check_sequence  # the command language lives with its compiler

    if not isinstance(raw, dict):
        raise CampaignError(f"{src}: expected a mapping at the top level")
    known = {f.name for f in dataclasses.fields(CampaignConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CampaignError(f"{src}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    commands = raw.get("commands") or dict(DEFAULT_COMMANDS)
    if not isinstance(commands, dict):
        raise CampaignError(f"{src}: commands must map sequence names to lists of segments")
    for name, segments in commands.items():
        check_sequence(segments, f"{src}: commands.{name}")
    terrains = _terrains(raw.get("terrains"), src)
    backend = str(raw.get("backend", "mujoco"))
    if backend not in BACKENDS:
        raise CampaignError(f"{src}: backend {backend!r} is not one of {', '.join(BACKENDS)}")
    seeds = raw.get("seeds", [0])
    seeds = seeds if isinstance(seeds, list) else [seeds]
    if not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise CampaignError(f"{src}: seeds must be a list of distinct non-negative integers, got {seeds!r}")
    cfg = CampaignConfig(
        name=str(raw.get("name", Path(src).stem)),
        robot=None if raw.get("robot") is None else str(raw["robot"]),
        backend=backend,
        runtime=str(raw.get("runtime", "auto")),
        episode_s=_number(raw.get("episode_s", 5.0), f"{src}: episode_s"),
        seeds=tuple(seeds),
        batch_size=_integer(raw.get("batch_size", 64), f"{src}: batch_size"),
        push_interval_s=_number(raw.get("push_interval_s", 2.0), f"{src}: push_interval_s"),
        settle_s=_number(raw.get("settle_s", 0.5), f"{src}: settle_s"),
        axes=_axes(raw.get("axes", {COMMAND_AXIS: [next(iter(commands))]}), commands, terrains, src),
        commands={str(k): list(v) for k, v in commands.items()},
        terrains=terrains,
        gates=_gates(raw.get("gates"), src),
    )
    if cfg.episode_s <= 0 or cfg.batch_size < 1 or cfg.push_interval_s <= 0 or cfg.settle_s < 0:
        raise CampaignError(f"{src}: episode_s, batch_size and push_interval_s must be positive, settle_s >= 0")
    if cfg.runtime not in RUNTIMES:
        raise CampaignError(f"{src}: runtime must be one of {', '.join(RUNTIMES)}, got {cfg.runtime!r}")
    if backend != "mujoco" and any(t.enabled for t in terrains.values()):
        raise CampaignError(f"{src}: terrains need the mujoco backend; {backend} has the robot's flat floor only")
    bad_axes = sorted(set(cfg.gates.per_axis) - set(cfg.axes))
    if bad_axes:
        raise CampaignError(f"{src}: gates.per_axis names axis(es) {', '.join(bad_axes)} that the campaign lacks")
    return cfg


def load_campaign(name_or_path: str | Path) -> CampaignConfig:
    path = resolve_campaign_path(name_or_path)
    raw = read_yaml_mapping(path, CampaignError, "campaign file", "expected a mapping at the top level")
    return campaign_from_dict(raw, str(path))
