"""Campaign YAML (config/campaigns/<name>.yaml) -> CampaignConfig: the scenario axes, command sequences, terrains,
seeds, episode length and acceptance gates of one validation campaign. Loaded by edge.config: unknown keys and bad
values fail with one line naming the file, the key and what it takes. See docs/campaigns.md for the reference."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.config import check_values, load_dataclass, setting
from edge.fileio import read_yaml_mapping
from edge.resources import config_path
from edge.runtime import BACKENDS as RUNTIMES
from sim.backends import BACKENDS
from sim.campaign.commands import check_sequence  # the command language lives with its compiler
from sim.errors import CampaignError
from sim.kpis import DESCRIPTIVE_KPIS, KPI_NAMES
from sim.randomization import NOMINAL
from sim.terrain import TerrainConfig

CAMPAIGN_DIRS = (config_path("campaigns"),)

# axis -> nominal value: what a scenario takes on an axis its campaign does not vary (ScenarioAxes says what each
# means). Physical axes vary per env inside one twin; obs_noise and push_velocity are twin-wide settings
# (RandomizationConfig), so scenarios are batched by them.
AXES = {**NOMINAL, "obs_noise": 0.0, "push_velocity": 0.0}
TWIN_AXES = ("obs_noise", "push_velocity")
COMMAND_AXIS = "commands"  # values are names of command sequences
DEFAULT_COMMANDS = {"forward": ["forward"]}  # half the robot's vx limit for the whole episode
TERRAIN_AXIS = "terrain"  # values are names of `terrains` entries; a twin-wide setting, so batched by it too


def _axis(help: str, gt: float | None = None, ge: float | None = None):
    return setting(help=help, length=(1, None), unique=True, gt=gt, ge=ge)


@dataclass(frozen=True)
class ScenarioAxes:
    """What each axis of `axes:` takes: a list of distinct values, the matrix being the product of every axis's
    values. CampaignConfig.axes keeps the axes given, in the YAML's order (scenario ids and batches follow it), and
    is checked against these fields; an axis left out keeps its nominal value (AXES)."""

    friction: list[float] = _axis("sliding friction coefficient of every contact", gt=0)
    payload_kg: list[float] = _axis("mass added to the base body in kg; negative removes mass")
    motor_strength: list[float] = _axis("scales PD torque and the torque limit: 0.8 is a 20% weaker motor", gt=0)
    kp_scale: list[float] = _axis("scales the PD stiffness", gt=0)
    kd_scale: list[float] = _axis("scales the PD damping", gt=0)
    latency_s: list[float] = _axis("actuation delay in seconds, resolved to physics steps", ge=0)
    motor_lag_s: list[float] = _axis("time constant of the drives' first-order lag in seconds", ge=0)
    joint_friction: list[float] = _axis("Coulomb friction added to every actuated joint's (N m or N)", ge=0)
    joint_armature: list[float] = _axis("rotor inertia added to every actuated joint's (kg m^2 or kg)", ge=0)
    payload_com_x: list[float] = _axis("the payload's centre of mass ahead of the base's (m)")
    payload_com_y: list[float] = _axis("the payload's centre of mass left of the base's (m)")
    payload_com_z: list[float] = _axis("the payload's centre of mass above the base's (m)")
    obs_noise: list[float] = _axis("multiplies each observation term's uniform noise width", ge=0)
    push_velocity: list[float] = _axis("base xy velocity change of a push every push_interval_s, in m/s", ge=0)
    commands: list[str] = _axis("names of `commands` entries; default: the first of them")
    terrain: list[str] = _axis("names of `terrains` entries; default: the robot's own floor")


@dataclass(frozen=True)
class GateConfig:
    """An episode fails when any KPI exceeds its limit in `kpis`; the campaign fails when the failing fraction
    of episodes exceeds `failure_rate` overall, or at any single value of any axis (`per_axis` overrides)."""

    kpis: dict[str, float] = setting(
        {}, "KPI -> upper limit: an episode fails when a KPI exceeds it", choices=KPI_NAMES, noun="KPI"
    )
    failure_rate: float = setting(
        0.0, "the failing share of episodes allowed overall and at every axis value", ge=0, le=1
    )
    per_axis: dict[str, float] = setting({}, "axis the campaign varies -> its own failure_rate", ge=0, le=1)

    def __post_init__(self) -> None:
        described = [k for k in self.kpis if k in DESCRIPTIVE_KPIS]
        if described:
            raise CampaignError(
                f"kpis {', '.join(described)} describe the gait (a gate is an upper limit): gate "
                "foot_slip_m_s or cost_of_transport instead"
            )

    def axis_rate(self, axis: str) -> float:
        return float(self.per_axis.get(axis, self.failure_rate))


@dataclass(frozen=True)
class CampaignConfig:
    """A campaign YAML, loaded by edge.config (load_campaign); `__post_init__` ties the axes to the command
    sequences and terrains they name."""

    name: str = setting("campaign", "the campaign's name in results and reports; default: the YAML file's stem")
    robot: str | None = setting(None, "the robot; default: the artifact's own, manifest robot.name")
    backend: str = setting("mujoco", "the twin's physics backend", choices=BACKENDS)
    runtime: str = setting(
        "auto", "the edge runtime that runs the policy, as edge.runtime.load_policy takes it", choices=RUNTIMES
    )
    episode_s: float = setting(5.0, "seconds every scenario runs", gt=0)
    seeds: tuple[int, ...] = setting(
        (0,),
        "replicates: each seed re-runs every scenario with other initial states",
        ge=0,
        length=(1, None),
        unique=True,
    )
    batch_size: int = setting(64, "envs per BatchedTwin, one Ray task", ge=1)
    push_interval_s: float = setting(2.0, "seconds between pushes when push_velocity > 0", gt=0)
    settle_s: float = setting(0.5, "seconds after each command change that tracking error skips", ge=0)
    axes: dict[str, Any] = setting({}, "axis -> list of values, see ScenarioAxes")
    commands: dict[str, list] = setting(
        DEFAULT_COMMANDS, "name -> list of segments, see sim.campaign.commands", length=(1, None)
    )
    terrains: dict[str, TerrainConfig] = setting(
        {}, "name -> sim.terrain.TerrainConfig; no types: the robot's own floor"
    )
    gates: GateConfig = field(default_factory=GateConfig, metadata={"help": "when an episode and the campaign fail"})

    def __post_init__(self) -> None:
        axes = check_values(ScenarioAxes, self.axes, name="axes", error=CampaignError)
        axes.setdefault(COMMAND_AXIS, [next(iter(self.commands))])
        object.__setattr__(self, "axes", axes)  # the values converted (numbers as floats), commands filled in
        for name, segments in self.commands.items():
            check_sequence(segments, f"commands.{name}")
        named = {COMMAND_AXIS: ("command sequence", "commands"), TERRAIN_AXIS: ("terrain", "terrains")}
        for axis, (what, section) in named.items():
            known = getattr(self, section)
            missing = [v for v in axes.get(axis, []) if v not in known]
            if missing:
                raise CampaignError(
                    f"axes.{axis}: {what}(s) {', '.join(missing)} not in {section}; known: {', '.join(known) or 'none'}"
                )
        if self.backend != "mujoco" and any(t.enabled for t in self.terrains.values()):
            raise CampaignError(f"terrains need the mujoco backend; {self.backend} has the robot's flat floor only")
        lacking = sorted(set(self.gates.per_axis) - set(axes))
        if lacking:
            raise CampaignError(f"gates.per_axis names axis(es) {', '.join(lacking)} that the campaign lacks")

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


def campaign_from_dict(raw: Mapping, src: str = "campaign") -> CampaignConfig:
    """The campaign a YAML mapping describes; errors name `src`, whose stem is the default name."""
    return load_dataclass(CampaignConfig, {"name": Path(src).stem, **raw}, error=CampaignError, name=src)


def load_campaign(name_or_path: str | Path) -> CampaignConfig:
    path = resolve_campaign_path(name_or_path)
    raw = read_yaml_mapping(path, CampaignError, "campaign file", "expected a mapping at the top level")
    return campaign_from_dict(raw, str(path))
