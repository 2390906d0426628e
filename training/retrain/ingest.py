"""Field logs -> KPI-ready trajectories: rosbag2 MCAP (as field_recorder or `ros2 bag record -s mcap` writes
them), rosbag2 SQLite (.db3, read with the metadata.yaml beside it) and ROS 1 bags (.bag).

MCAP records are streamed in file order, so a truncated or corrupt file yields everything before the damage plus
a note of where it starts, never an exception. Each signal (ROLES) is read from the topic of its name, namespaced
or not ("/go1/imu/data" is imu), or from the topic a user mapping names (`--topic odom=/wheel_controller/odom`),
and only from messages of the types it reads (TYPES); the first topic to match a signal is its only source.
Messages are aligned on odom (one per control step on the twin, the robot's state estimate on hardware), or on
imu when no odometry is logged: each step takes the latest cmd_vel, imu, joint_states and foot_forces at or
before its time (header stamps where a message has one, else the time it was logged), and the joint command that
produced it (`command_issue_times`). foot_forces (a legged robot's foot force sensors, one force in N per foot in
the robot YAML's `feet` order) gives the foot contacts, and with them the gait KPIs.

What a log does not carry is said, not filled in: `FieldLog.missing` names each signal the KPIs could not get and
why (no commands, no base orientation, ...). A planar odometry (position z and the orientation's x and y 0
throughout, as a wheeled robot's velocity controller publishes it) gives neither a base height nor a tilt; an IMU
that publishes no orientation (orientation_covariance[0] = -1, or a zero quaternion) gives no tilt either.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mcap.reader import NonSeekingReader
from mcap_ros2.decoder import DecoderFactory

from edge.observation import projected_gravity
from sim.kpis import Trajectory
from sim.tasks.config import FeetConfig
from training.errors import ConfigError, TrainingError

# signal -> the topic it is read from by default (namespaced or not)
ROLES = {
    "cmd_vel": "/cmd_vel",
    "odom": "/odom",
    "imu": "/imu/data",
    "joint_states": "/joint_states",
    "joint_commands": "/joint_commands",
    "foot_forces": "/foot_forces",
}
TOPICS = tuple(ROLES.values())
# the message types each signal is read from (ROS 1 names "pkg/Type" count as "pkg/msg/Type")
TYPES = {
    "/cmd_vel": ("geometry_msgs/msg/Twist", "geometry_msgs/msg/TwistStamped"),
    "/odom": ("nav_msgs/msg/Odometry",),
    "/imu/data": ("sensor_msgs/msg/Imu",),
    "/joint_states": ("sensor_msgs/msg/JointState",),
    "/joint_commands": ("std_msgs/msg/Float64MultiArray",),
    "/foot_forces": ("std_msgs/msg/Float64MultiArray",),
}
LOG_SUFFIXES = (".mcap", ".db3", ".bag")
CONTACT_FORCE_N = FeetConfig().contact_force_n  # a foot is down above this force, as in the twin's gait KPIs


@dataclass
class FieldLog:
    """One log file's aligned arrays (T control steps), what could not be read, and what the log does not carry."""

    path: Path
    t: np.ndarray  # (T,) s since the first odom (imu without odometry)
    commands: np.ndarray  # (T, 3) zeros when none are logged (missing["commands"])
    base_lin_vel: np.ndarray  # (T, 3) base frame (odom twist)
    base_ang_vel: np.ndarray  # (T, 3) base frame (imu, else odom twist)
    projected_gravity: np.ndarray  # (T, 3)
    base_height: np.ndarray  # (T,) odom z; NaN: not logged (no odometry, or a planar one)
    joint_pos: np.ndarray  # (T, n) manifest joint order
    joint_vel: np.ndarray  # (T, n)
    joint_targets: np.ndarray  # (T, n) the latest joint_commands (NaN before the first)
    damage: list[str] = field(default_factory=list)  # human-readable notes of unreadable spans
    orientation: np.ndarray | None = None  # (T, 4) w, x, y, z (imu, else a 3D odometry's pose); None: not logged
    foot_force: np.ndarray | None = None  # (T, F) N from foot_forces (NaN before the first); None: none logged
    logged: dict[str, str] = field(default_factory=dict)  # every topic the file holds -> its message type
    read_as: dict[str, str] = field(default_factory=dict)  # signal (ROLES) -> the topic it was read from
    missing: dict[str, str] = field(default_factory=dict)  # what the KPIs need and the log lacks -> why
    # (T, 3) the odometry's base-frame angular velocity beside the IMU's (base_ang_vel); None: not both logged
    odom_ang_vel: np.ndarray | None = None

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

    def topics_error(self) -> str | None:
        """One line when the file was read whole and none of its topics gives the robot's state: what it holds,
        what ingest needs and how to map it; None when it has a state topic, holds no message at all (a segment
        closed before anything was published), or damage explains the lack."""
        if self.damage or not self.logged or "odom" in self.read_as or "imu" in self.read_as:
            return None
        held = ", ".join(f"{t} ({ty})" for t, ty in self.logged.items()) or "no topics"
        needed = "; ".join(f"{s} ({' or '.join(TYPES[ROLES[s]])})" for s in ("odom", "imu", "cmd_vel", "joint_states"))
        return (
            f"{self.path.name}: no topic gives the robot's state (odom or imu); the log holds {held}; ingest reads "
            f"{needed}; name yours with --topic SIGNAL=TOPIC, e.g. --topic odom=/wheel_controller/odom"
        )


def log_files(path: str | Path) -> list[Path]:
    """A log file, a rosbag2 directory, or a directory of them (field_recorder's output, .partial excluded):
    .mcap, .db3 and ROS 1 .bag files; a rosbag2 SQLite bag by its first .db3 file, however many it has."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise TrainingError(f"no field log at {p}")
    found = sorted(f for s in LOG_SUFFIXES for f in p.rglob(f"*{s}") if ".partial" not in f.parts)
    # a rosbag2 SQLite bag split into several .db3 files is read whole through its metadata.yaml: one entry each
    bags = {f.parent: f for f in reversed(found) if f.suffix == ".db3"}
    return [f for f in found if f.suffix != ".db3" or bags[f.parent] == f]


def topic_mapping(pairs: list[str]) -> dict[str, str]:
    """`--topic SIGNAL=TOPIC` values -> {signal: topic}; one line naming the signals on a bad one."""
    mapping = {}
    for pair in pairs:
        signal, _, topic = pair.partition("=")
        if signal not in ROLES or not topic:
            raise ConfigError(f"--topic {pair}: expected SIGNAL=TOPIC with SIGNAL one of {', '.join(ROLES)}")
        mapping[signal] = topic
    return mapping


def _full_type(name: str) -> str:
    """A message type's ROS 2 name ("geometry_msgs/Twist", as ROS 1 names it -> "geometry_msgs/msg/Twist")."""
    package, _, rest = name.partition("/")
    return f"{package}/msg/{rest}" if rest and "/" not in rest else name


def _canonical(topic: str, mapping: Mapping[str, str]) -> str | None:
    """The ingest topic a logged topic is: the one the user's mapping (signal -> topic) names it for, else the one
    of its name, namespaced or not ("/go1/imu/data" -> "/imu/data"), among the signals the mapping leaves open.
    A namespaced field_recorder logs one robot's topics under their full names, as rosbag2 does."""
    given = {"/" + t.lstrip("/"): ROLES[s] for s, t in mapping.items()}
    if topic in given:
        return given[topic]
    return next((t for t in TOPICS if t not in given.values() and (topic == t or topic.endswith(t))), None)


@dataclass
class _Topics:
    """Which logged topic each signal is read from: the first of a type it reads to match it."""

    mapping: Mapping[str, str]  # signal -> topic, from the user
    logged: dict[str, str] = field(default_factory=dict)  # topic -> message type
    claimed: dict[str, str] = field(default_factory=dict)  # ingest topic -> logged topic

    def __call__(self, topic: str, msgtype: str) -> str | None:
        """The ingest topic a channel's messages are read as; None: not read."""
        self.logged.setdefault(topic, _full_type(msgtype))
        canonical = _canonical(topic, self.mapping)
        if canonical is None or _full_type(msgtype) not in TYPES[canonical]:
            return None
        return canonical if self.claimed.setdefault(canonical, topic) == topic else None

    def read_as(self) -> dict[str, str]:
        return {s: self.claimed[t] for s, t in ROLES.items() if t in self.claimed}


def _read_messages(path: Path, damage: list[str], topics: _Topics):
    """(ingest topic, log_time_ns, message) of the topics ingest reads: .bag and .db3 through rosbags, the rest
    as MCAP."""
    reader = _read_rosbag if path.suffix in (".bag", ".db3") else _read_mcap
    yield from reader(path, damage, topics)


def _read_mcap(path: Path, damage: list[str], topics: _Topics):
    """In file order; stops at the first unreadable record and notes it."""
    factory, decoders, read_as = DecoderFactory(), {}, {}
    with open(path, "rb") as f:
        reader = NonSeekingReader(f)
        last_ns = None
        try:
            # file order, not log-time order: sorting would read the whole file before yielding anything
            for schema, channel, message in reader.iter_messages(log_time_order=False):
                if channel.id not in read_as:
                    read_as[channel.id] = topics(channel.topic, schema.name if schema else "")
                topic = read_as[channel.id]
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


def _read_rosbag(path: Path, damage: list[str], topics: _Topics):
    """A ROS 1 bag, or a rosbag2 .db3 with the metadata.yaml of its directory, in log-time order; a file that
    does not open is one line, a read that fails later a damage note."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    kind = "ROS 1 bag" if path.suffix == ".bag" else "rosbag2 SQLite log (read with the metadata.yaml beside it)"
    try:
        reader = AnyReader(
            [path if path.suffix == ".bag" else path.parent], default_typestore=get_typestore(Stores.LATEST)
        )
        reader.open()
    except Exception as e:  # noqa: BLE001 - rosbags raises its own, OS and parser errors on a file it cannot open
        raise TrainingError(f"{path}: not readable as a {kind}: {e.__class__.__name__}: {e}") from None
    last_ns = None
    try:
        read_as = {c.id: topics(c.topic, c.msgtype) for c in reader.connections}
        wanted = [c for c in reader.connections if read_as[c.id]]  # none: rosbags would read them all
        for connection, log_ns, raw in reader.messages(wanted) if wanted else ():
            msg = reader.deserialize(raw, connection.msgtype)
            last_ns = log_ns
            yield read_as[connection.id], log_ns, msg
    except Exception as e:  # noqa: BLE001 - damaged bytes fail in rosbags' reader or deserialiser alike
        where = "before any message" if last_ns is None else f"after t = {last_ns * 1e-9:.3f} s (log time)"
        damage.append(f"{path.name}: unreadable {where} ({e.__class__.__name__}); kept what came before")
    finally:
        reader.close()


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
        twist = getattr(msg, "twist", msg)  # TwistStamped or Twist
        return np.array([twist.linear.x, twist.linear.y, twist.angular.z])
    if topic == "/imu/data":
        o, w = msg.orientation, msg.angular_velocity
        quat = np.array([o.w, o.x, o.y, o.z])
        given = msg.orientation_covariance[0] != -1 and np.linalg.norm(quat) > 0.5  # REP 145: -1 = no estimate
        return np.array([*quat, w.x, w.y, w.z, float(given)])
    if topic == "/joint_states":
        names = list(msg.name)
        if not (all(j in names for j in joint_names) and len(msg.position) == len(names) == len(msg.velocity)):
            return None
        idx = [names.index(j) for j in joint_names]
        return np.concatenate([np.asarray(msg.position)[idx], np.asarray(msg.velocity)[idx]])
    if topic == "/joint_commands":
        return np.asarray(msg.data, dtype=np.float64) if len(msg.data) == n else None
    v, w = msg.twist.twist.linear, msg.twist.twist.angular  # /odom: one control step
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    return np.array([v.x, v.y, v.z, w.x, w.y, w.z, p.z, o.w, o.x, o.y, o.z])


def _absent(signal: str, mapping: Mapping[str, str]) -> str:
    """Why a signal was not read, e.g. "no cmd_vel topic (/cmd_vel, namespaced or not; geometry_msgs/msg/Twist
    or geometry_msgs/msg/TwistStamped)"."""
    where = f"{mapping[signal]}, as mapped" if signal in mapping else f"{ROLES[signal]}, namespaced or not"
    return f"no {signal} topic ({where}; {' or '.join(TYPES[ROLES[signal]])})"


def _missing(
    read: dict[str, str], imu_orientation: bool, planar: bool, joint_names: list[str], feet: int, mapping
) -> dict[str, str]:
    """What the KPIs need and the log does not give -> why (`read`: the signals read, with messages)."""
    missing = {}
    if "cmd_vel" not in read:
        missing["commands"] = f"no velocity commands logged: {_absent('cmd_vel', mapping)}"
    if "odom" not in read:
        missing["base_velocity"] = f"no base velocity logged: {_absent('odom', mapping)}"
    if not read.keys() & {"imu", "odom"}:
        missing["yaw_rate"] = f"no yaw rate logged: {_absent('imu', mapping)} and {_absent('odom', mapping)}"
    if not imu_orientation and ("odom" not in read or planar):
        imu = "the IMU publishes no orientation" if "imu" in read else _absent("imu", mapping)
        odom = "the odometry is planar (z, roll and pitch 0)" if "odom" in read else _absent("odom", mapping)
        missing["orientation"] = f"no base orientation logged: {imu}, {odom}"
    if "joint_states" not in read:
        missing["joint_states"] = (
            f"no joint states of the robot's joints ({', '.join(joint_names)}): {_absent('joint_states', mapping)}"
            " or none naming them all"
        )
    if feet and "foot_forces" not in read:
        missing["foot_forces"] = f"no foot contacts logged: {_absent('foot_forces', mapping)} with {feet} forces"
    return missing


def read_field_log(
    path: str | Path, joint_names: list[str], feet: int = 0, topics: Mapping[str, str] | None = None
) -> FieldLog:
    """Align one log's topics on odom (imu without odometry); joints are reordered by name into `joint_names`;
    `feet`: the robot's foot count (its foot_forces messages must have as many values; 0: foot forces are not
    read); `topics`: signal (ROLES) -> the topic to read it from, beside the default names."""
    path = Path(path)
    damage: list[str] = []
    n = len(joint_names)
    names = _Topics(dict(topics or {}))
    seen: dict[str, tuple[list[int], list]] = {t: ([], []) for t in TOPICS}
    newest_state, newest = -1, []  # per command: the newest /joint_states stamp logged before it
    for topic, log_ns, msg in _read_messages(path, damage, names):
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
    read = {s: t for s, t in names.read_as().items() if seen[ROLES[s]][0]}
    clock = "/odom" if seen["/odom"][0] else "/imu/data"
    imu_rows = np.array(seen["/imu/data"][1]).reshape(-1, 8)
    odom_rows = np.array(seen["/odom"][1]).reshape(-1, 11)
    planar = len(odom_rows) > 0 and bool(np.all(odom_rows[:, [6, 8, 9]] == 0))
    imu_orientation = len(imu_rows) > 0 and bool(np.all(imu_rows[:, 7] == 1))
    context = {"logged": names.logged, "read_as": read}
    context["missing"] = _missing(read, imu_orientation, planar, joint_names, feet, names.mapping)
    if not seen[clock][0]:
        empty = np.zeros((0, n))
        return FieldLog(
            path, np.zeros(0), *(np.zeros((0, 3)),) * 4, np.zeros(0), empty, empty, empty, damage, **context
        )
    at = np.array(seen[clock][0])
    order = {t: np.argsort(np.array(seen[t][0]), kind="stable") for t in TOPICS}

    def aligned(topic: str, fill: np.ndarray, times: np.ndarray | None = None, strict: bool = False) -> np.ndarray:
        k = order[topic]
        stamps = np.array(seen[topic][0], dtype=np.int64)[k] if times is None else times
        return _latest(stamps, [seen[topic][1][i] for i in k], at, fill, strict)

    cmd = aligned("/cmd_vel", np.zeros(3))
    imu = aligned("/imu/data", np.array([1.0, 0, 0, 0, 0, 0, 0, 1]))
    odom = odom_rows if clock == "/odom" else np.full((len(at), 11), np.nan)
    joints = aligned("/joint_states", np.full(2 * n, np.nan))
    # the command that produced the state at T answered a state before T (commands keep their logged order)
    issued = command_issue_times(np.array(seen["/joint_commands"][0], dtype=np.int64), np.array(newest, np.int64))
    targets = _latest(issued, seen["/joint_commands"][1], at, np.full(n, np.nan), strict=True)
    foot_force = aligned("/foot_forces", np.full(feet, np.nan)) if seen["/foot_forces"][0] else None
    orientation = None  # the base orientation: the IMU's estimate, else a 3D odometry's pose
    if imu_orientation:
        orientation = imu[:, :4]
    elif clock == "/odom" and not planar:
        orientation = odom[:, 7:]
    gravity_from = np.tile([1.0, 0, 0, 0], (len(at), 1)) if orientation is None else orientation
    return FieldLog(
        path,
        (at - at[0]) * 1e-9,
        cmd,
        np.nan_to_num(odom[:, :3]),
        imu[:, 4:7] if len(imu_rows) else odom[:, 3:6],
        projected_gravity(gravity_from),
        np.full(len(at), np.nan) if planar else odom[:, 6],
        joints[:, :n],
        joints[:, n:],
        targets,
        damage,
        orientation,
        foot_force,
        **context,
        odom_ang_vel=odom[:, 3:6] if clock == "/odom" and len(imu_rows) else None,
    )
