"""The SIL's field robot: the training twin made into a robot it cannot match exactly.

A field robot YAML (config/retrain/field_*.yaml) holds the twin parameters the robot hides (keys of
sim.randomization.FIELD_KEYS, which system identification searches: payload and its centre of mass, joint
friction, gains, delay, the drives' lag) and, under `effects:`, what no parameter of the training twin expresses: a
delay that jitters from one control period to the next, and sensors with bias, noise, an offset and wheel slip.
sim_bridge_node applies both; system identification then fits what it can, and the replay error left over is the
reality gap it cannot close.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge.config import load_dataclass, setting
from edge.fileio import read_yaml_mapping
from sim.errors import SimError
from sim.randomization import PhysicsParams, fixed_params

__all__ = ["FieldEffects", "FieldRobot", "FieldRobotConfig", "load_field_robot"]


@dataclass(frozen=True)
class FieldEffects:
    """What the field robot does that the training twin cannot: each 0 (the default) is off."""

    gyro_bias: tuple[float, float, float] = setting((0.0, 0.0, 0.0), "IMU angular-velocity bias (rad/s)", length=3)
    gyro_noise: float = setting(0.0, "IMU angular-velocity white noise, standard deviation (rad/s)", ge=0)
    odom_noise: float = setting(0.0, "odometry twist white noise, standard deviation (m/s, rad/s)", ge=0)
    odom_slip: float = setting(
        0.0, "odometry reads (1 - slip) of the base's true velocity: wheels that slip", ge=0, le=0.5
    )
    encoder_offset_rad: float = setting(0.0, "a constant offset on every joint position reading (rad or m)")
    latency_jitter_s: float = setting(
        0.0,
        "each control period's commands reach the drives up to this much later than the delay, uniformly at random "
        "in whole physics steps (s): a bus or an executor that is not on time",
        ge=0,
        le=0.2,
    )
    seed: int = setting(0, "seed of the sensor noise", ge=0)


@dataclass(frozen=True)
class FieldRobotConfig:
    hidden: dict[str, float] = field(default_factory=dict)  # twin parameters, sim.randomization.FIELD_KEYS
    effects: FieldEffects = field(default_factory=FieldEffects)


def load_field_robot(path: str | Path | None) -> FieldRobotConfig:
    """A field robot YAML; None or '' is the nominal twin. Unknown keys, here or under `effects`, are refused with
    the file's name."""
    if not path:
        return FieldRobotConfig()
    values = read_yaml_mapping(path, SimError, "field twin", "expected a mapping of twin parameters")
    effects = values.pop("effects", None) or {}
    if not isinstance(effects, dict):
        raise SimError(f"{path}: effects must be a mapping of FieldEffects fields")
    try:  # an unknown or invalid hidden parameter, refused now (the time step only rounds the delay)
        fixed_params(values, 1.0)
    except SimError as e:
        raise SimError(f"{path}: {e}") from None
    return FieldRobotConfig(dict(values), load_dataclass(FieldEffects, effects, error=SimError, name=f"{path} effects"))


class FieldRobot:
    """One twin env (the bridge's) as the field robot: its hidden parameters set, each control period's delay
    jittered, each reading corrupted as its sensors would."""

    def __init__(self, twin, config: FieldRobotConfig):
        self.twin, self.effects = twin, config.effects
        self.params: PhysicsParams = fixed_params(config.hidden, twin.spec.physics_dt)
        twin.set_params(self.params)
        # a robot runs until stopped, not in episodes: the twin's time limit would reset it, and with it the hidden
        # parameters to the nominal twin's (after a fall, the caller sets them again)
        twin.max_episode_steps = np.iinfo(np.int64).max
        self._rng = np.random.default_rng(self.effects.seed)
        # the jitter's own draws, so that the sensor noise stays what it was with or without it
        self._jitter_rng = np.random.default_rng([self.effects.seed, 1])
        self._jitter_steps = int(round(self.effects.latency_jitter_s / twin.spec.physics_dt))

    def next_period(self) -> None:
        """Before each control step: this period's commands reach the drives late by the delay plus its jitter."""
        if self._jitter_steps:
            late = self._jitter_rng.integers(0, self._jitter_steps + 1, size=self.twin.num_envs)
            self.twin.set_latency(self.params.latency_steps + late)

    def sense_joints(self, position: np.ndarray) -> np.ndarray:
        return position + self.effects.encoder_offset_rad

    def sense_gyro(self, angular_velocity: np.ndarray) -> np.ndarray:
        return angular_velocity + np.asarray(self.effects.gyro_bias) + self._noise(self.effects.gyro_noise, 3)

    def sense_odometry(self, linear: np.ndarray, angular: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The base twist the odometry reports: slipping wheels read short; noise on both."""
        noise = self.effects.odom_noise
        return (1.0 - self.effects.odom_slip) * linear + self._noise(noise, 3), angular + self._noise(noise, 3)

    def _noise(self, std: float, n: int) -> np.ndarray:
        return self._rng.normal(0.0, std, n) if std else np.zeros(n)
