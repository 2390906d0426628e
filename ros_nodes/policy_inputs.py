"""policy_node's inputs: the latest /joint_states, /imu/data, /odom and /cmd_vel as observation term values, with
when each came and the instant it describes; and the gait clock (gait_phase) from the controller's step count. No
ROS import: it reads the message fields, so it is unit-tested with real messages and without DDS.

A message that cannot give a term its value (missing joints, fields of the wrong size) gives it NaN, which the
watchdog reports, rather than a value that looks like a state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edge.observation import gait_phase, projected_gravity_one

if TYPE_CHECKING:
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import Imu, JointState

AXES = ("vx", "vy", "wz")


def command_limits(limits: dict[str, list[float]], overrides: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of (vx, vy, wz): the manifest's command limits, narrowed to +-override where an override is > 0."""
    low = np.array([limits[k][0] for k in AXES], dtype=np.float64)
    high = np.array([limits[k][1] for k in AXES], dtype=np.float64)
    for i, o in enumerate(overrides):
        if o > 0:
            low[i], high[i] = max(low[i], -o), min(high[i], o)
    return low, high


def stamp_ns(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


class PolicyInputs:
    """`values` (term -> physical value), `received` (input -> time it came, on the caller's clock), `header_ns`
    (input -> its header stamp) and the /cmd_vel command, clamped to its limits. `gyro_bias` (x, y, z, rad/s): the
    IMU's calibrated bias, taken off its angular velocity."""

    def __init__(
        self,
        joint_names: list[str],
        default_pose: np.ndarray,
        cmd_low: np.ndarray,
        cmd_high: np.ndarray,
        gyro_bias: np.ndarray | None = None,
    ):
        self.joint_names, self.default_pose = list(joint_names), default_pose
        self.cmd_low, self.cmd_high = cmd_low, cmd_high
        self.gyro_bias = np.zeros(3) if gyro_bias is None else np.asarray(gyro_bias, dtype=np.float64)
        self.values: dict[str, np.ndarray] = {}
        self.received: dict[str, float] = {}
        self.header_ns: dict[str, int] = {}
        self.command, self.cmd_stamp = np.zeros(3), -np.inf
        self._zero_command = np.zeros(3)
        self._order: np.ndarray | None = None  # message index of each of our joints
        self._names_seen: tuple[str, ...] | None = None

    def joint_states(self, msg: JointState, now: float) -> int:
        """Positions (relative to the default pose) and velocities in the manifest's joint order; returns the stamp."""
        names = tuple(msg.name)
        if names != self._names_seen:  # drivers keep one order; look it up only when it changes
            missing = [j for j in self.joint_names if j not in names]
            self._order = None if missing else np.array([names.index(j) for j in self.joint_names])
            self._names_seen = names
        pos, vel = np.asarray(msg.position, dtype=np.float64), np.asarray(msg.velocity, dtype=np.float64)
        if self._order is None or len(pos) != len(names) or len(vel) != len(names):
            pos = vel = np.full(len(self.joint_names), np.nan)
        else:
            pos, vel = pos[self._order] - self.default_pose, vel[self._order]
        self.values["joint_pos"], self.values["joint_vel"] = pos, vel
        return self._came("joint_states", msg.header, now)

    def imu(self, msg: Imu, now: float) -> int:
        q, w = msg.orientation, msg.angular_velocity
        self.values["projected_gravity"] = np.array(projected_gravity_one(q.w, q.x, q.y, q.z))
        self.values["base_ang_vel"] = np.array([w.x, w.y, w.z]) - self.gyro_bias
        return self._came("imu", msg.header, now)

    def odom(self, msg: Odometry, now: float) -> int:
        v = msg.twist.twist.linear  # in child_frame_id, the base frame
        self.values["base_lin_vel"] = np.array([v.x, v.y, v.z])
        return self._came("odom", msg.header, now)

    def cmd_vel(self, msg: Twist, now: float) -> None:
        """A non-finite command is dropped: the last good one stays until it times out."""
        cmd = np.array([msg.linear.x, msg.linear.y, msg.angular.z])
        if np.all(np.isfinite(cmd)):
            self.command, self.cmd_stamp = np.clip(cmd, self.cmd_low, self.cmd_high), now

    def observation_values(
        self, now: float, cmd_timeout_s: float, last_action: np.ndarray, clock_s: float | None = None
    ) -> dict[str, np.ndarray]:
        """Every term's value at `now`: a command older than `cmd_timeout_s` is zero (stand still). clock_s: the gait
        clock's time (control steps since the controller started x the control period), for a policy that observes
        gait_phase; None leaves the term out."""
        command = self.command if now - self.cmd_stamp <= cmd_timeout_s else self._zero_command
        values = {**self.values, "velocity_command": command, "last_action": last_action}
        if clock_s is not None:
            values["gait_phase"] = gait_phase(clock_s, command)
        return values

    def _came(self, source: str, header, now: float) -> int:
        self.received[source] = now
        self.header_ns[source] = stamp_ns(header)
        return self.header_ns[source]
