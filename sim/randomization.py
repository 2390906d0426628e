"""Domain randomisation: per-env physical parameters drawn from YAML ranges with a seeded generator."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from edge.config import load_dataclass, setting
from sim.errors import SimError


@dataclass(frozen=True)
class RandomizationConfig:
    """Ranges are [low, high]; a range with low == high fixes the value. `enabled: false` gives the nominal twin.
    Loaded by edge.config (a task YAML's `randomization:`, PPOConfig.randomization_ranges: from_dict)."""

    enabled: bool = setting(True, "false: the nominal twin, every parameter at its nominal value")
    friction: tuple[float, float] = setting((0.5, 1.25), "sliding friction coefficient of every contact", gt=0)
    payload_kg: tuple[float, float] = setting((-0.5, 1.5), "mass added to the base body, in kg")
    motor_strength: tuple[float, float] = setting((0.9, 1.1), "scales PD torque and the torque limit", gt=0)
    kp_scale: tuple[float, float] = setting((0.9, 1.1), "scales the PD stiffness")
    kd_scale: tuple[float, float] = setting((0.9, 1.1), "scales the PD damping")
    latency_s: tuple[float, float] = setting((0.0, 0.01), "actuation delay in seconds, resolved to physics steps", ge=0)
    motor_lag_s: tuple[float, float] = setting(
        (0.0, 0.0),
        "time constant of a first-order lag between each drive's (delayed) target and what it applies, in seconds: "
        "a current loop, a gearbox, a velocity filter",
        ge=0,
    )
    joint_friction: tuple[float, float] = setting(
        (0.0, 0.0), "Coulomb friction added to every actuated joint's (N m, or N; MuJoCo's frictionloss)", ge=0
    )
    joint_armature: tuple[float, float] = setting(
        (0.0, 0.0), "rotor inertia added to every actuated joint's (kg m^2, or kg; MuJoCo's armature)", ge=0
    )
    payload_com_x: tuple[float, float] = setting((0.0, 0.0), "the payload's centre of mass ahead of the base's (m)")
    payload_com_y: tuple[float, float] = setting((0.0, 0.0), "the payload's centre of mass left of the base's (m)")
    payload_com_z: tuple[float, float] = setting((0.0, 0.0), "the payload's centre of mass above the base's (m)")
    obs_noise: float = setting(1.0, "multiplies each observation term's noise width")
    push_interval_s: float = setting(8.0, "seconds between pushes; 0 disables pushes")
    push_velocity: float = setting(0.5, "max base xy velocity change of a push, in m/s")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple) and value[0] > value[1]:
                raise SimError(f"{f.name} must be [low, high] with low <= high, got {list(value)}")

    @classmethod
    def from_dict(cls, raw: Mapping | None, source: str = "randomization") -> RandomizationConfig:
        """The defaults with the fields `raw` names; errors name `source`."""
        return load_dataclass(cls, raw or {}, error=SimError, name=source)

    def nominal(self) -> RandomizationConfig:
        return dataclasses.replace(self, enabled=False)


@dataclass(frozen=True)
class Rehearsal:
    """A twin's randomisation in which a share of the envs rehearse another one: a fine-tuning to new ranges keeps
    its first envs on the twin the policy was first trained on, so that it does not forget it."""

    randomization: RandomizationConfig  # what the other envs draw
    rehearsed: RandomizationConfig  # what the rehearsing envs draw
    share: float

    def envs(self, num_envs: int) -> int:
        """How many envs rehearse: the first ones."""
        return int(round(self.share * num_envs))


@dataclass
class PhysicsParams:
    """One value per env; what a backend needs to make env i's physics differ from env j's."""

    friction: np.ndarray
    payload_kg: np.ndarray
    motor_strength: np.ndarray
    kp_scale: np.ndarray
    kd_scale: np.ndarray
    latency_steps: np.ndarray  # int, physics steps
    motor_lag_s: np.ndarray  # s, the drives' first-order lag (0: none)
    joint_friction: np.ndarray
    joint_armature: np.ndarray
    payload_com_x: np.ndarray  # base frame, from the base's centre of mass
    payload_com_y: np.ndarray
    payload_com_z: np.ndarray

    @classmethod
    def nominal(cls, num_envs: int, friction: float = 1.0) -> PhysicsParams:
        return fixed_params({"friction": friction}, 1.0, num_envs)

    @classmethod
    def from_columns(cls, columns: Mapping[str, np.ndarray], sim_dt: float) -> PhysicsParams:
        """One array per FIELD_KEYS key (the delay in seconds, resolved to whole physics steps)."""
        values = {k: np.asarray(columns[k], dtype=np.float64) for k in FIELD_KEYS if k != "latency_s"}
        return cls(**values, latency_steps=np.rint(np.asarray(columns["latency_s"]) / sim_dt).astype(np.int64))

    def subset(self, env_ids: np.ndarray) -> PhysicsParams:
        return PhysicsParams(**{f.name: getattr(self, f.name)[env_ids] for f in dataclasses.fields(self)})

    def assign(self, env_ids: np.ndarray, other: PhysicsParams) -> None:
        for f in dataclasses.fields(self):
            getattr(self, f.name)[env_ids] = getattr(other, f.name)


def sample_params(cfg: RandomizationConfig, num: int, sim_dt: float, rng: np.random.Generator) -> PhysicsParams:
    """Draw `num` parameter sets; the nominal twin (enabled=False) gets the nominal values."""
    if not cfg.enabled:
        return PhysicsParams.nominal(num)

    def uniform(key: str) -> np.ndarray:
        low, high = getattr(cfg, key)
        if key in FIXED_UNLESS_RANGED and low == high:
            return np.full(num, low)
        return rng.uniform(low, high, size=num)

    return PhysicsParams.from_columns({k: uniform(k) for k in FIELD_KEYS}, sim_dt)


# the physical parameters a twin's envs may differ in, at their nominal values: fixed_params({}), the twin as trained
NOMINAL = {
    "friction": 1.0,
    "payload_kg": 0.0,
    "motor_strength": 1.0,
    "kp_scale": 1.0,
    "kd_scale": 1.0,
    "latency_s": 0.0,
    "motor_lag_s": 0.0,
    "joint_friction": 0.0,
    "joint_armature": 0.0,
    "payload_com_x": 0.0,
    "payload_com_y": 0.0,
    "payload_com_z": 0.0,
}
FIELD_KEYS = tuple(NOMINAL)
# parameters added after seeds were published: one fixed by its range draws nothing, so the draws of the others,
# and every seeded run before them, stay as they were
FIXED_UNLESS_RANGED = (
    "motor_lag_s",
    "joint_friction",
    "joint_armature",
    "payload_com_x",
    "payload_com_y",
    "payload_com_z",
)
SIGNED_KEYS = ("payload_kg", "payload_com_x", "payload_com_y", "payload_com_z")  # the others are >= 0


def fixed_params(values: dict, sim_dt: float, num_envs: int = 1) -> PhysicsParams:
    """Fixed physical parameters (nominal where unset), e.g. a field twin's hidden offsets:
    {friction: 0.5, payload_kg: 3.0, latency_s: 0.02}."""
    unknown = sorted(set(values) - set(FIELD_KEYS))
    if unknown:
        raise SimError(f"unknown twin parameter(s) {', '.join(unknown)}; known: {', '.join(FIELD_KEYS)}")
    for key, value in values.items():
        value = float(value)
        if not np.isfinite(value) or (key not in SIGNED_KEYS and value < 0):
            raise SimError(f"twin parameter {key} must be finite and non-negative, got {value}")
    return PhysicsParams.from_columns(
        {k: np.full(num_envs, float(values.get(k, NOMINAL[k]))) for k in FIELD_KEYS}, sim_dt
    )
