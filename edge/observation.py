"""Observation terms: one table shared by the twin (which computes them from physics state), the artifact
manifest (which records the layout) and the policy node (which computes them from ROS topics).

A term's value is multiplied by its scale before it enters the policy; noise is added in physical units
before scaling, as legged_gym does.

gait_phase is a clock, not a sensor: (sin, cos) of 2 pi GAIT_HZ t, where t is the time since the episode began in
the twin and since the controller (re)started on the robot, both counted in control periods; zero while the command
is a stand-still one (gait_phase below), as MuJoCo's mjbatch Go1 joystick example hides its trot clock at rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GAIT_HZ = 2.0  # the gait clock's frequency: a Go1-size trot (mjbatch's Go1 joystick example), 0.25 s per half cycle
STILL_COMMAND = 0.01  # |(vx, vy, wz)| at or below this is a stand-still command (Playground's threshold)


@dataclass(frozen=True)
class ObsTerm:
    name: str
    size: int
    scale: tuple[float, ...]
    noise: float  # uniform noise half-width in physical units (training only)
    ros_source: str


def obs_term(name: str, num_joints: int) -> ObsTerm:
    """The definition of observation term `name` for a robot with `num_joints` actuated joints."""
    n = num_joints
    table = {
        "base_lin_vel": (3, (2.0,) * 3, 0.1, "/odom twist.twist.linear, base frame (m/s)"),
        "base_ang_vel": (3, (0.25,) * 3, 0.2, "/imu/data angular_velocity, base frame (rad/s)"),
        "projected_gravity": (3, (1.0,) * 3, 0.05, "/imu/data orientation: unit gravity in base frame"),
        "velocity_command": (3, (2.0, 2.0, 0.25), 0.0, "/cmd_vel linear.x, linear.y, angular.z"),
        "joint_pos": (n, (1.0,) * n, 0.01, "/joint_states position minus default_pose (rad)"),
        "joint_vel": (n, (0.05,) * n, 1.5, "/joint_states velocity (rad/s)"),
        "last_action": (n, (1.0,) * n, 0.0, "previous policy output (before scaling)"),
        "gait_phase": (
            2,
            (1.0, 1.0),
            0.0,
            f"policy_node's clock: sin, cos of 2 pi {GAIT_HZ:g} Hz x control steps since activation (or a fault's "
            "end) x period_s; 0 while /cmd_vel is zero",
        ),
    }
    if name not in table:
        raise ValueError(f"unknown observation term {name!r}; known: {', '.join(table)}")
    size, scale, noise, source = table[name]
    return ObsTerm(name, size, scale, noise, source)


DEFAULT_TERMS = {
    # a joint position is meaningless for a wheel, so velocity- and torque-driven robots leave it out
    "position": (
        "base_lin_vel",
        "base_ang_vel",
        "projected_gravity",
        "velocity_command",
        "joint_pos",
        "joint_vel",
        "last_action",
    ),
    "velocity": ("base_lin_vel", "base_ang_vel", "projected_gravity", "velocity_command", "joint_vel", "last_action"),
    "torque": ("base_lin_vel", "base_ang_vel", "projected_gravity", "velocity_command", "joint_vel", "last_action"),
}


class ObservationLayout:
    """Assembles the policy input from named term values: concatenated in term order, noise (physical units)
    added, then scaled. The twin and the policy node both build observations through this one path."""

    def __init__(self, terms: list[ObsTerm]):
        self.terms = list(terms)
        self.dim = sum(t.size for t in self.terms)
        self.scale = np.concatenate([t.scale for t in self.terms]).astype(np.float64)
        self.noise = np.concatenate([np.full(t.size, t.noise) for t in self.terms])

    @classmethod
    def from_manifest(cls, terms: list[dict], num_joints: int) -> ObservationLayout:
        """From a manifest's observation.terms (name, size, scale, ros_source); noise widths from the table."""
        return cls(
            [
                ObsTerm(
                    t["name"], int(t["size"]), tuple(t["scale"]), obs_term(t["name"], num_joints).noise, t["ros_source"]
                )
                for t in terms
            ]
        )

    def assemble(self, values: dict[str, np.ndarray], noise: np.ndarray | None = None) -> np.ndarray:
        """values[name]: [batch, size] in physical units; noise: [batch, dim] uniform draws in [-1, 1] or None."""
        raw = np.concatenate([values[t.name] for t in self.terms], axis=-1)
        if noise is not None:
            raw = raw + noise * self.noise
        return (raw * self.scale).astype(np.float32)


def gait_phase(time_s: np.ndarray | float, command: np.ndarray) -> np.ndarray:
    """[..., 2] (sin, cos) of the gait clock's angle 2 pi GAIT_HZ time_s, zero where the (vx, vy, wz) command
    [..., 3] is a stand-still one: shown at rest, the clock would have the policy march on the spot waiting for a
    command. The twin and policy_node both call this, with time_s = control steps x control period."""
    angle = 2.0 * np.pi * GAIT_HZ * np.asarray(time_s, dtype=np.float64)
    moving = np.linalg.norm(command, axis=-1) > STILL_COMMAND
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1) * moving[..., None]


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # np.cross is several times slower on small batches (axis juggling); this sits on the twin's hot path
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], axis=-1)


def rotate_world_to_base(quat_wxyz: np.ndarray, vec_world: np.ndarray) -> np.ndarray:
    """Express world-frame vectors in the base frame of orientation `quat_wxyz`; both batched on axis 0."""
    w = quat_wxyz[..., :1]
    u = quat_wxyz[..., 1:]
    # R^T v for a unit quaternion (w, u): with t = 2 v x u, R^T v = v + w t + t x u
    t = 2.0 * _cross(vec_world, u)
    return vec_world + w * t + _cross(t, u)


def projected_gravity(quat_wxyz: np.ndarray) -> np.ndarray:
    """Unit gravity direction in the base frame: (0, 0, -1) when the base is level."""
    g = np.zeros(quat_wxyz.shape[:-1] + (3,))
    g[..., 2] = -1.0
    return rotate_world_to_base(quat_wxyz, g)


def projected_gravity_one(w: float, x: float, y: float, z: float) -> tuple[float, float, float]:
    """projected_gravity of one unit quaternion in plain floats, for a ROS callback: on a batch of one, numpy's
    per-call overhead costs ~50x this. R^T (0, 0, -1) is minus the third row of the rotation matrix."""
    return -2.0 * (x * z - w * y), -2.0 * (y * z + w * x), 2.0 * (x * x + y * y) - 1.0
