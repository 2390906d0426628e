"""Field logs (MCAP, as field_recorder or `ros2 bag record -s mcap` writes them) -> KPI-ready trajectories.

Records are streamed in file order, so a truncated or corrupt file yields everything before the damage plus a
note of where it starts, never an exception. Messages are aligned on /odom (one per control step on the twin,
the robot's state estimate on hardware): each step takes the latest /cmd_vel, /imu/data, /joint_states and
/foot_forces at or before its time (header stamps where a message has one, else the time it was logged), and the
joint command that produced it (`command_issue_times`). /foot_forces (a legged robot's foot force sensors, one
force in N per foot in the robot YAML's `feet` order) gives the foot contacts, and with them the gait KPIs.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mcap.reader import NonSeekingReader
from mcap_ros2.decoder import DecoderFactory

from edge.observation import projected_gravity
from sim.kpis import Trajectory
from sim.tasks.config import FeetConfig
from training.errors import TrainingError

TOPICS = ("/cmd_vel", "/odom", "/imu/data", "/joint_states", "/joint_commands", "/foot_forces")
CONTACT_FORCE_N = FeetConfig().contact_force_n  # a foot is down above this force, as in the twin's gait KPIs


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
    orientation: np.ndarray | None = None  # (T, 4) w, x, y, z from /imu/data (system id starts replays from it)
    foot_force: np.ndarray | None = None  # (T, F) N from /foot_forces (NaN before the first); None: none logged

    @property
    def dt(self) -> float:
        return float(np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0

    def trajectory(self, index: slice | np.ndarray = slice(None)) -> Trajectory:
        return Trajectory(
            dt=self.dt,
            commands=self.commands[index],
            base_lin_vel=self.base_lin_vel[index],
            base_ang_vel=self.base_ang_vel[index],
            projected_gravity=self.projected_gravity[index],
            joint_pos=self.joint_pos[index],
            joint_vel=self.joint_vel[index],
            base_height=self.base_height[index],
            foot_contact=None if self.foot_force is None else self.foot_force[index] > CONTACT_FORCE_N,
        )

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
        raise TrainingError(f"no field log at {p}")
    return sorted(f for f in p.rglob("*.mcap") if ".partial" not in f.parts)


def _canonical(topic: str) -> str | None:
    """The ingest topic a logged topic is, namespaced or not ("/go1/imu/data" -> "/imu/data"); None: not ours.
    A namespaced field_recorder logs one robot's topics under their full names, as rosbag2 does."""
    return next((t for t in TOPICS if topic == t or topic.endswith(t)), None)


def _read_messages(path: Path, damage: list[str]):
    """(topic, log_time_ns, message) in file order; stops at the first unreadable record and notes it."""
    factory, decoders = DecoderFactory(), {}
    with open(path, "rb") as f:
        reader = NonSeekingReader(f)
        last_ns = None
        try:
            # file order, not log-time order: sorting would read the whole file before yielding anything
            for schema, channel, message in reader.iter_messages(log_time_order=False):
                topic = _canonical(channel.topic)
                if topic is None:
                    continue
                if channel.id not in decoders:
                    # the vendored rosidl parser prints a damaged schema's every bad line to stderr before it
                    # raises; the raise is what the damage note keeps, the console stays the project's
                    with contextlib.redirect_stderr(io.StringIO()):
                        decoders[channel.id] = factory.decoder_for(channel.message_encoding, schema)
                last_ns = message.log_time
                yield topic, message.log_time, decoders[channel.id](message.data)
        except Exception as e:  # noqa: BLE001 - damaged bytes fail in struct, zstd, cdr or mcap code alike
            where = "before any message" if last_ns is None else f"after t = {last_ns * 1e-9:.3f} s (log time)"
            damage.append(
                f"{path.name}: unreadable from byte {f.tell()} of {path.stat().st_size}, {where} "
                f"({e.__class__.__name__}); kept what came before"
            )


def _stamp_ns(msg, log_ns: int) -> int:
    """A message's header stamp, or the time it was logged when it has none (Twist, Float64MultiArray)."""
    header = getattr(msg, "header", None)
    ns = header.stamp.sec * 1_000_000_000 + header.stamp.nanosec if header is not None else 0
    return ns or log_ns


def command_issue_times(log_ns: np.ndarray, newest_state_ns: np.ndarray, window: int = 25) -> np.ndarray:
    """The stamp of the state each joint command answered.

    A command carries no stamp. `newest_state_ns[j]` is the stamp of the newest /joint_states (the input a policy
    node ticks on) logged before command j, -1 when none was (its log time then stands in). Command j answered
    that state or, when the recorder logged the next state first, the one before. Commands answer consecutive
    states, one per period, so answered_j - j * period is constant until a step passes without a command, when
    it grows; the low end of newest_k - k * period over the next `window` commands recovers it as long as some
    of them were logged before the following state. The third smallest, not the smallest: a recorder that
    logs a command before the state it answered makes a rare value too small.
    """
    if len(log_ns) < 3:
        return np.where(newest_state_ns >= 0, newest_state_ns, log_ns)
    period = int(np.median(np.diff(log_ns)))
    steps = period * np.arange(len(log_ns), dtype=np.int64)
    offset = np.where(newest_state_ns >= 0, newest_state_ns, log_ns) - steps
    padded = np.concatenate([offset, np.full(window - 1, offset[-1])])
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)
    return np.partition(windows, 2, axis=1)[:, 2] + steps


def _latest(times: np.ndarray, values: list, at: np.ndarray, fill: np.ndarray, strict: bool = False) -> np.ndarray:
    """values[k] of the latest times[k] <= at (< at when strict) per element of `at`; `fill` before the first."""
    idx = np.searchsorted(times, at, side="left" if strict else "right") - 1
    table = np.array([fill, *values]) if values else np.array([fill])
    return table[np.where(idx >= 0, idx + 1, 0)]


def _value(topic: str, msg, joint_names: list[str], n: int, feet: int) -> np.ndarray | None:
    """The numbers ingest keeps from one message (None: a message of another shape, skipped)."""
    if topic == "/foot_forces":
        return np.asarray(msg.data, dtype=np.float64) if feet and len(msg.data) == feet else None
    if topic == "/cmd_vel":
        return np.array([msg.linear.x, msg.linear.y, msg.angular.z])
    if topic == "/imu/data":
        o, w = msg.orientation, msg.angular_velocity
        return np.array([o.w, o.x, o.y, o.z, w.x, w.y, w.z])
    if topic == "/joint_states":
        names = list(msg.name)
        if not (all(j in names for j in joint_names) and len(msg.position) == len(names) == len(msg.velocity)):
            return None
        idx = [names.index(j) for j in joint_names]
        return np.concatenate([np.asarray(msg.position)[idx], np.asarray(msg.velocity)[idx]])
    if topic == "/joint_commands":
        return np.asarray(msg.data, dtype=np.float64) if len(msg.data) == n else None
    v, p = msg.twist.twist.linear, msg.pose.pose.position  # /odom: one control step
    return np.array([v.x, v.y, v.z, p.z])


def read_field_log(path: str | Path, joint_names: list[str], feet: int = 0) -> FieldLog:
    """Align one MCAP file's topics on /odom; joints are reordered by name into `joint_names`; `feet`: the robot's
    foot count (its /foot_forces messages must have as many values; 0: foot forces are not read)."""
    path = Path(path)
    damage: list[str] = []
    n = len(joint_names)
    seen: dict[str, tuple[list[int], list]] = {t: ([], []) for t in TOPICS}
    newest_state, newest = -1, []  # per command: the newest /joint_states stamp logged before it
    for topic, log_ns, msg in _read_messages(path, damage):
        try:
            value = _value(topic, msg, joint_names, n, feet)
            stamp = log_ns if topic == "/joint_commands" else _stamp_ns(msg, log_ns)
        except (AttributeError, TypeError, ValueError, IndexError) as e:  # a damaged schema decodes to other fields
            if not any(d.startswith(f"{path.name}: {topic}") for d in damage):
                damage.append(
                    f"{path.name}: {topic} messages that do not decode as their type ({e.__class__.__name__}); skipped"
                )
            continue
        if value is None:
            continue
        times, values = seen[topic]
        times.append(stamp)
        values.append(value)
        if topic == "/joint_states":
            newest_state = max(newest_state, times[-1])
        elif topic == "/joint_commands":
            newest.append(newest_state)
    odom_ns, odom = seen["/odom"]
    if not odom:
        empty = np.zeros((0, n))
        return FieldLog(path, np.zeros(0), *(np.zeros((0, 3)),) * 4, np.zeros(0), empty, empty, empty, damage)
    at = np.array(odom_ns)
    order = {t: np.argsort(np.array(seen[t][0]), kind="stable") for t in TOPICS}

    def aligned(topic: str, fill: np.ndarray, times: np.ndarray | None = None, strict: bool = False) -> np.ndarray:
        k = order[topic]
        stamps = np.array(seen[topic][0], dtype=np.int64)[k] if times is None else times
        return _latest(stamps, [seen[topic][1][i] for i in k], at, fill, strict)

    cmd = aligned("/cmd_vel", np.zeros(3))
    imu = aligned("/imu/data", np.array([1.0, 0, 0, 0, 0, 0, 0]))
    joints = aligned("/joint_states", np.full(2 * n, np.nan))
    # the command that produced the state at T answered a state before T (commands keep their logged order)
    issued = command_issue_times(np.array(seen["/joint_commands"][0], dtype=np.int64), np.array(newest, np.int64))
    targets = _latest(issued, seen["/joint_commands"][1], at, np.full(n, np.nan), strict=True)
    rows = np.array(odom)
    foot_force = aligned("/foot_forces", np.full(feet, np.nan)) if seen["/foot_forces"][0] else None
    return FieldLog(
        path,
        (at - at[0]) * 1e-9,
        cmd,
        rows[:, :3],
        imu[:, 4:],
        projected_gravity(imu[:, :4]),
        rows[:, 3],
        joints[:, :n],
        joints[:, n:],
        targets,
        damage,
        imu[:, :4],
        foot_force,
    )
