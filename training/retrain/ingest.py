"""Field logs (MCAP, as field_recorder or `ros2 bag record -s mcap` writes them) -> KPI-ready trajectories.

Records are streamed in file order, so a truncated or corrupt file yields everything before the damage plus a
note of where it starts, never an exception. Messages are aligned on /odom (one per control step on the twin,
the robot's state estimate on hardware): each step takes the latest /cmd_vel, /imu/data and /joint_states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mcap.reader import NonSeekingReader
from mcap_ros2.decoder import DecoderFactory

from edge.observation import projected_gravity
from sim.kpis import Trajectory

TOPICS = ("/cmd_vel", "/odom", "/imu/data", "/joint_states", "/joint_commands")


@dataclass
class FieldLog:
    """One log file's aligned arrays (T control steps) and what could not be read."""

    path: Path
    t: np.ndarray  # (T,) s since the first /odom
    commands: np.ndarray  # (T, 3)
    base_lin_vel: np.ndarray  # (T, 3) base frame (odom twist)
    base_ang_vel: np.ndarray  # (T, 3) base frame (imu)
    projected_gravity: np.ndarray  # (T, 3)
    base_height: np.ndarray  # (T,) odom z
    joint_pos: np.ndarray  # (T, n) manifest joint order
    joint_vel: np.ndarray  # (T, n)
    joint_targets: np.ndarray  # (T, n) the latest /joint_commands (NaN before the first)
    damage: list[str] = field(default_factory=list)  # human-readable notes of unreadable spans

    @property
    def dt(self) -> float:
        return float(np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0

    def trajectory(self, index: slice | np.ndarray = slice(None)) -> Trajectory:
        return Trajectory(dt=self.dt, commands=self.commands[index], base_lin_vel=self.base_lin_vel[index],
                          base_ang_vel=self.base_ang_vel[index], projected_gravity=self.projected_gravity[index],
                          joint_pos=self.joint_pos[index], joint_vel=self.joint_vel[index],
                          base_height=self.base_height[index])

    def episodes(self, min_steps: int = 25) -> list[slice]:
        """Spans of constant command (a command change starts a new episode), at least min_steps long."""
        if len(self.t) == 0:
            return []
        change = np.flatnonzero(np.any(np.diff(self.commands, axis=0) != 0, axis=1)) + 1
        bounds = [0, *change.tolist(), len(self.t)]
        return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b - a >= min_steps]


def mcap_files(path: str | Path) -> list[Path]:
    """A .mcap file, a rosbag2 directory, or a directory of them (field_recorder's output, .partial excluded)."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"no field log at {p}")
    return sorted(f for f in p.rglob("*.mcap") if ".partial" not in f.parts)


def _read_messages(path: Path, damage: list[str]):
    """(topic, log_time_ns, message) in file order; stops at the first unreadable record and notes it."""
    with open(path, "rb") as f:
        reader = NonSeekingReader(f, decoder_factories=[DecoderFactory()])
        last_ns = None
        try:
            # file order, not log-time order: sorting would read the whole file before yielding anything
            for _, channel, message, decoded in reader.iter_decoded_messages(topics=list(TOPICS), log_time_order=False):
                last_ns = message.log_time
                yield channel.topic, message.log_time, decoded
        except Exception as e:  # noqa: BLE001 - damaged bytes fail in struct, zstd, cdr or mcap code alike
            where = "before any message" if last_ns is None else f"after t = {last_ns * 1e-9:.3f} s (log time)"
            damage.append(f"{path.name}: unreadable from byte {f.tell()} of {path.stat().st_size}, {where} "
                          f"({e.__class__.__name__}); kept what came before")


def read_field_log(path: str | Path, joint_names: list[str]) -> FieldLog:
    """Align one MCAP file's topics on /odom; joints are reordered by name into `joint_names`."""
    path = Path(path)
    damage: list[str] = []
    n = len(joint_names)
    cmd, imu_w, imu_q = np.zeros(3), np.zeros(3), np.array([1.0, 0, 0, 0])
    q, qd, targets = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    rows = []
    for topic, stamp, msg in _read_messages(path, damage):
        if topic == "/cmd_vel":
            cmd = np.array([msg.linear.x, msg.linear.y, msg.angular.z])
        elif topic == "/imu/data":
            o, w = msg.orientation, msg.angular_velocity
            imu_q, imu_w = np.array([o.w, o.x, o.y, o.z]), np.array([w.x, w.y, w.z])
        elif topic == "/joint_states":
            names = list(msg.name)
            if all(j in names for j in joint_names) and len(msg.position) == len(names) == len(msg.velocity):
                idx = [names.index(j) for j in joint_names]
                q, qd = np.asarray(msg.position)[idx], np.asarray(msg.velocity)[idx]
        elif topic == "/joint_commands":
            if len(msg.data) == n:
                targets = np.asarray(msg.data, dtype=np.float64)
        else:  # /odom: one control step
            v, p = msg.twist.twist.linear, msg.pose.pose.position
            rows.append((stamp * 1e-9, cmd, np.array([v.x, v.y, v.z]), imu_w, imu_q, p.z, q, qd, targets))
    if not rows:
        empty = np.zeros((0, n))
        return FieldLog(path, np.zeros(0), *(np.zeros((0, 3)),) * 4, np.zeros(0), empty, empty, empty, damage)
    t, c, lin, ang, quat, z, jp, jv, jt = (np.array(x) for x in zip(*rows, strict=True))
    return FieldLog(path, t - t[0], c, lin, ang, projected_gravity(quat), z, jp, jv, jt, damage)
