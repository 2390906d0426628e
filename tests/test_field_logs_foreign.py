"""Logs the project did not write: a robot's own topic names mapped with --topic, TwistStamped commands, ROS 1 bags
and rosbag2 SQLite beside MCAP, and KPIs a log cannot support reported "not measured", never as a number. The logs
are written by hand with rosbags' writers, in the shapes real robots record."""

import numpy as np
import pytest
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from sim.kpis import RobotLimits
from sim2real.cli import main
from tests.field_logs import JOINTS, write_log
from training.errors import ConfigError, TrainingError
from training.retrain.drift import FieldKpis, KpiRule, TriggerPolicy, decide, field_kpis, ingest_logs
from training.retrain.ingest import log_files, read_field_log, topic_mapping

LIMITS = RobotLimits(np.full(2, -np.inf), np.full(2, np.inf), np.full(2, 8.0), 0.8, 0.05)
SCRIPT = [(2.0, 0.5, 0.0, 0.0), (2.0, 0.0, 0.0, 0.8), (2.0, 0.3, 0.0, -0.5)]  # (seconds, vx, vy, wz)
# the robot reaches 90% of each command at once: tracking errors of 10% of the commands, after the settle time
LIN_ERROR = np.mean([0.05, 0.0, 0.03])
ANG_ERROR = np.mean([0.0, 0.08, 0.05])
# a wheeled robot outdoors: odometry under its velocity controller's name, commands stamped
FOREIGN = {"odom": "/wheel_controller/odom", "imu": "/imu/data", "cmd_vel": "/cmd_vel_stamped"}
OWN = {"odom": "/odom", "imu": "/imu/data", "cmd_vel": "/cmd_vel", "joint_states": "/joint_states"}
POLICY = TriggerPolicy.from_yaml()


class Messages:
    """Messages of one type store (ROS 2 or ROS 1), built from plain numbers."""

    def __init__(self, store):
        self.store, self.types = store, store.types
        self.ros1 = "seq" in self.types["std_msgs/msg/Header"].__dataclass_fields__

    def header(self, t_ns: int):
        stamp = self.types["builtin_interfaces/msg/Time"](sec=t_ns // 10**9, nanosec=t_ns % 10**9)
        return self.types["std_msgs/msg/Header"](**({"seq": 0} if self.ros1 else {}), stamp=stamp, frame_id="base")

    def vec(self, x=0.0, y=0.0, z=0.0):
        return self.types["geometry_msgs/msg/Vector3"](x=float(x), y=float(y), z=float(z))

    def quat(self, roll: float):
        return self.types["geometry_msgs/msg/Quaternion"](x=np.sin(roll / 2), y=0.0, z=0.0, w=np.cos(roll / 2))

    def twist(self, vx: float, wz: float):
        return self.types["geometry_msgs/msg/Twist"](linear=self.vec(vx), angular=self.vec(z=wz))

    def command(self, t_ns: int, vx: float, wz: float, stamped: bool):
        if stamped:
            return self.types["geometry_msgs/msg/TwistStamped"](header=self.header(t_ns), twist=self.twist(vx, wz))
        return self.twist(vx, wz)

    def odom(self, t_ns: int, vx: float, wz: float, planar: bool):
        t = self.types
        pose = t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0 if planar else 0.1), orientation=self.quat(0.0)
        )
        return t["nav_msgs/msg/Odometry"](
            header=self.header(t_ns),
            child_frame_id="base_link",
            pose=t["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
            twist=t["geometry_msgs/msg/TwistWithCovariance"](twist=self.twist(vx, wz), covariance=np.zeros(36)),
        )

    def imu(self, t_ns: int, wz: float, roll: float, orientation: bool):
        covariance = np.zeros(9) if orientation else np.array([-1.0, *np.zeros(8)])  # REP 145: -1, no estimate
        return self.types["sensor_msgs/msg/Imu"](
            header=self.header(t_ns),
            orientation=self.quat(roll)
            if orientation
            else self.types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=0.0),
            orientation_covariance=covariance,
            angular_velocity=self.vec(z=wz),
            angular_velocity_covariance=np.zeros(9),
            linear_acceleration=self.vec(z=9.81),
            linear_acceleration_covariance=np.zeros(9),
        )

    def joints(self, t_ns: int, vx: float):
        wheel = np.full(2, vx * 10)
        return self.types["sensor_msgs/msg/JointState"](
            header=self.header(t_ns), name=JOINTS, position=np.zeros(2), velocity=wheel, effort=np.zeros(0)
        )


TYPES = {
    "odom": "nav_msgs/msg/Odometry",
    "imu": "sensor_msgs/msg/Imu",
    "joint_states": "sensor_msgs/msg/JointState",
}


def robot_log(
    where,
    fmt: str = "mcap",
    topics: dict = FOREIGN,
    commands: list | None = SCRIPT,
    imu_orientation: bool = True,
    planar: bool = True,
    tilt: tuple[float, float] | None = None,
    dt: float = 0.02,
):
    """A log as a robot records it, at 50 Hz: the signals in `topics` (signal -> topic name) only; the robot
    drives SCRIPT's velocities at 90% (without `commands` logged it drives them all the same); `tilt`: (from, to)
    seconds the base is rolled 1.2 rad. fmt: mcap or db3 (rosbag2 directory) or bag (ROS 1). The file to read."""
    store = get_typestore(Stores.ROS1_NOETIC if fmt == "bag" else Stores.ROS2_JAZZY)
    make = Messages(store)
    stamped = topics.get("cmd_vel", "").endswith("stamped")
    types = {**TYPES, "cmd_vel": f"geometry_msgs/msg/{'TwistStamped' if stamped else 'Twist'}"}
    where.mkdir(parents=True, exist_ok=True)
    if fmt == "bag":
        path = where / "robot.bag"
        writer, serialize = Writer1(path), store.serialize_ros1
    else:
        path = where / "robot"
        plugin = StoragePlugin.MCAP if fmt == "mcap" else StoragePlugin.SQLITE3
        writer, serialize = Writer2(path, version=9, storage_plugin=plugin), store.serialize_cdr
    with writer:
        conns = {s: writer.add_connection(t, types[s], typestore=store) for s, t in topics.items()}
        t_ns = 0
        for seconds, vx, _, wz in SCRIPT:
            for _ in range(int(round(seconds / dt))):
                roll = 1.2 if tilt and tilt[0] <= t_ns * 1e-9 < tilt[1] else 0.0
                msgs = {
                    "cmd_vel": make.command(t_ns, vx, wz, stamped) if commands else None,
                    "imu": make.imu(t_ns, 0.9 * wz, roll, imu_orientation),
                    "joint_states": make.joints(t_ns, 0.9 * vx),
                    "odom": make.odom(t_ns, 0.9 * vx, 0.9 * wz, planar),
                }
                for signal, conn in conns.items():
                    if msgs[signal] is not None:
                        writer.write(conn, t_ns, serialize(msgs[signal], types[signal]))
                t_ns += int(dt * 1e9)
    return log_files(path)[0]


def kpis_of(path, topics=None) -> FieldKpis:
    return field_kpis([read_field_log(path, JOINTS, topics=topics)], LIMITS)


def test_foreign_topics_mapped_with_topic_give_the_tracking_errors(tmp_path):
    path = robot_log(tmp_path)
    assert path.suffix == ".mcap"
    # odometry under the controller's name is found by its suffix; /cmd_vel_stamped is no /cmd_vel
    unmapped = kpis_of(path)
    assert "tracking_error_lin" not in unmapped.means
    assert unmapped.show("tracking_error_lin").startswith("not measured: no velocity commands logged: no cmd_vel")
    mapped = topic_mapping(["cmd_vel=/cmd_vel_stamped", "odom=/wheel_controller/odom"])
    log = read_field_log(path, JOINTS, topics=mapped)
    assert log.read_as == {"cmd_vel": "/cmd_vel_stamped", "odom": "/wheel_controller/odom", "imu": "/imu/data"}
    kpis = field_kpis([log], LIMITS)
    assert kpis.episodes == 3
    assert kpis.means["tracking_error_lin"] == pytest.approx(LIN_ERROR, abs=1e-6)  # TwistStamped commands read
    assert kpis.means["tracking_error_ang"] == pytest.approx(ANG_ERROR, abs=1e-6)
    assert kpis.means["falls"] == 0  # the IMU's orientation: upright throughout
    assert set(kpis.not_measured) == {"joint_limit_violations"}  # no joint states in this log
    assert kpis.show("joint_limit_violations").startswith("not measured: no joint states of the robot's joints")


def test_a_log_without_commands_has_no_tracking_error_and_a_planar_odometry_no_fall(tmp_path):
    """The issue's log: a wheeled robot's odometry (planar: z 0) and IMU, no commands. It once scored tracking
    error 0.0 and falls 1.0 (odom z = 0 read as a base on the ground)."""
    kpis = kpis_of(robot_log(tmp_path, topics={"odom": "/wheel_controller/odom", "imu": "/imu/data"}))
    for name in ("tracking_error_lin", "tracking_error_ang"):
        assert name not in kpis.means
        assert kpis.not_measured[name].startswith("no velocity commands logged: no cmd_vel topic (/cmd_vel")
    assert kpis.means["falls"] == 0 and kpis.episodes == 1  # one span without a command change
    decision = decide(kpis, {"tracking_error_lin": 0.1, "falls": 0.0}, POLICY)
    assert not decision.retrain
    assert "tracking error not measured: no velocity commands logged" in decision.summary()
    assert "0.0" not in decision.summary().split("not measured")[1]

    # the trigger watches only what the log cannot give: no decision, said so, not a retraining
    tracking = TriggerPolicy(kpis={"tracking_error_lin": KpiRule(2.0, 0.05)})
    decision = decide(kpis, {"tracking_error_lin": 0.1}, tracking)
    assert not decision.retrain and decision.reasons == [
        "no KPI the trigger watches is measured in the logs, no decision"
    ]
    assert decision.summary().endswith("tracking error not measured: " + kpis.not_measured["tracking_error_lin"])

    # an IMU without an orientation estimate beside a planar odometry: nothing tells a fall
    blind = kpis_of(robot_log(tmp_path / "blind", topics={"odom": "/odom", "imu": "/imu/data"}, imu_orientation=False))
    assert "falls" not in blind.means
    assert blind.not_measured["falls"] == (
        "no base orientation logged: the IMU publishes no orientation, the odometry is planar (z, roll and pitch 0)"
    )


def test_an_imu_only_log_measures_yaw_rate_and_falls_not_linear_tracking(tmp_path):
    path = robot_log(tmp_path, topics={"imu": "/imu/data", "cmd_vel": "/cmd_vel"}, tilt=(1.0, 1.5))
    log = read_field_log(path, JOINTS)
    assert len(log.t) == 300 and log.dt == pytest.approx(0.02)  # aligned on the IMU
    assert np.isnan(log.base_height).all()
    kpis = field_kpis([log], LIMITS)
    assert kpis.means["tracking_error_ang"] == pytest.approx(ANG_ERROR, abs=1e-6)
    assert kpis.means["falls"] == pytest.approx(1 / 3)  # one fall, in the first of three episodes
    assert kpis.not_measured["tracking_error_lin"].startswith("no base velocity logged: no odom topic")


def test_a_ros1_bag_and_a_rosbag2_sqlite_log_read_as_mcap_does(tmp_path):
    reference = kpis_of(robot_log(tmp_path / "mcap", "mcap", OWN, planar=False))
    assert reference.not_measured == {}
    for fmt, suffix in (("bag", ".bag"), ("db3", ".db3")):
        path = robot_log(tmp_path / fmt, fmt, OWN, planar=False)
        assert path.suffix == suffix and log_files(tmp_path / fmt) == [path]
        kpis = kpis_of(path)
        assert kpis.episodes == 3 and kpis.not_measured == {}
        assert kpis.means == pytest.approx(reference.means, abs=1e-9)
    (path.parent / "robot_1.db3").write_bytes(b"")  # a bag split in two files: its reader reads both, once
    assert log_files(tmp_path / "db3") == [path]
    stamped = robot_log(tmp_path / "stamped", "bag", {**OWN, "cmd_vel": "/cmd_vel_stamped"})
    assert kpis_of(stamped, {"cmd_vel": "/cmd_vel_stamped"}).means["tracking_error_lin"] == pytest.approx(LIN_ERROR)


def test_a_log_of_nothing_ingest_reads_fails_with_one_line(tmp_path):
    from sim.robot import load_robot

    path = robot_log(tmp_path, topics={"odom": "/wheel/odometry_raw", "cmd_vel": "/cmd_vel"})
    path = path.rename(tmp_path / "raw.mcap")
    store = get_typestore(Stores.ROS2_JAZZY)
    with Writer2(tmp_path / "pose", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        pose = store.types["geometry_msgs/msg/PoseStamped"](
            header=Messages(store).header(0),
            pose=store.types["geometry_msgs/msg/Pose"](
                position=store.types["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0),
                orientation=Messages(store).quat(0),
            ),
        )
        odom = w.add_connection("/odom", "geometry_msgs/msg/PoseStamped", typestore=store)  # the name, not the type
        w.write(odom, 0, store.serialize_cdr(pose, "geometry_msgs/msg/PoseStamped"))
    spec = load_robot("rover")
    with pytest.raises(TrainingError) as e:
        ingest_logs([path], spec)
    line = str(e.value)
    assert len(line.splitlines()) == 1
    assert "raw.mcap: no topic gives the robot's state (odom or imu); the log holds /wheel/odometry_raw" in line
    assert "odom (nav_msgs/msg/Odometry)" in line and "--topic odom=/wheel_controller/odom" in line
    with pytest.raises(TrainingError, match=r"holds /odom \(geometry_msgs/msg/PoseStamped\)"):
        ingest_logs(log_files(tmp_path / "pose"), spec)
    # a segment closed before anything was published holds no topic: nothing to read, nothing wrong
    with Writer2(tmp_path / "empty", version=9, storage_plugin=StoragePlugin.MCAP):
        pass
    assert ingest_logs(log_files(tmp_path / "empty"), spec)["episodes"] == 0
    # mapped, it reads
    read = ingest_logs([path], spec, {"odom": "/wheel/odometry_raw"})
    assert read["logs"][0]["read_as"]["odom"] == "/wheel/odometry_raw" and read["episodes"] == 3
    assert "falls" in read["not_measured"]  # planar odometry, no IMU


def test_an_unreadable_format_is_one_line(tmp_path):
    lonely = tmp_path / "lonely" / "robot_0.db3"
    lonely.parent.mkdir()
    lonely.write_bytes(b"SQLite format 3\x00")
    with pytest.raises(TrainingError, match="robot_0.db3: not readable as a rosbag2 SQLite log") as e:
        read_field_log(lonely, JOINTS)
    assert len(str(e.value).splitlines()) == 1
    fake = tmp_path / "fake.bag"
    fake.write_bytes(b"#ROSBAG V1.2\n" + b"\x00" * 32)
    with pytest.raises(TrainingError, match="fake.bag: not readable as a ROS 1 bag"):
        read_field_log(fake, JOINTS)


def test_the_projects_own_logs_measure_everything(tmp_path):
    log = read_field_log(write_log(tmp_path / "own.mcap", SCRIPT), JOINTS)
    assert log.missing == {} and field_kpis([log], LIMITS).not_measured == {}


def test_topic_mappings_are_checked(tmp_path, capsys):
    with pytest.raises(ConfigError, match="--topic wheels=/odom: expected SIGNAL=TOPIC with SIGNAL one of cmd_vel"):
        topic_mapping(["wheels=/odom"])
    bad = tmp_path / "trigger.yaml"
    bad.write_text("topics: {wheel_odom: /wheel_controller/odom}")
    with pytest.raises(ValueError, match="unknown signal.*wheel_odom"):
        TriggerPolicy.from_yaml(bad)
    bad.write_text("topics: {odom: /wheel_controller/odom}")
    assert TriggerPolicy.from_yaml(bad).topics == {"odom": "/wheel_controller/odom"}
    argv = ["retrain", "--logs", str(tmp_path), "--artifact", str(tmp_path), "--topic", "odom"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--topic odom: expected SIGNAL=TOPIC" in err and len(err.splitlines()) == 1


def test_a_dry_run_says_what_the_logs_can_tell_and_trains_nothing(tmp_path, capsys, monkeypatch):
    """`sim2real retrain --dry-run` on the issue's log (a foreign odometry topic and an IMU, no commands, no
    joints): the topics it read, each KPI measured or not and why, the trigger's verdict, and that system id has
    nothing to replay. Nothing is written: no registry, no output directory."""
    import yaml

    from sim.campaign.config import load_campaign
    from sim.campaign.runner import CampaignRequest, run_campaign
    from tests.campaign_helpers import export_rover_policy

    artifact = export_rover_policy(tmp_path / "policy")
    campaign = tmp_path / "tiny.yaml"
    tiny = {"name": "tiny", "episode_s": 2.0, "axes": {"commands": ["forward"]}}
    tiny |= {"commands": {"forward": ["forward for 2 s"]}, "gates": {"kpis": {"falls": 1}, "failure_rate": 1.0}}
    campaign.write_text(yaml.safe_dump(tiny))
    run_campaign(CampaignRequest(artifact, load_campaign(campaign), tmp_path / "validation"))  # the trigger's baseline
    robot_log(tmp_path / "logs", topics={"odom": "/wheel_controller/odom", "imu": "/imu/data"})
    monkeypatch.setenv("COLUMNS", "400")  # rich's table: one line per row
    monkeypatch.chdir(tmp_path)
    argv = ["retrain", "--logs", str(tmp_path / "logs"), "--artifact", str(artifact), "--dry-run"]
    assert main([*argv, "--topic", "odom=/wheel_controller/odom"]) == 0
    out = capsys.readouterr().out
    assert "odom <- /wheel_controller/odom" in out and "imu <- /imu/data" in out
    # this IMU's yaw rate is its odometry's (the test robot has one source): the bias cannot be told
    assert "z 0.0000 (-inf to inf), not determined: the odometry's angular velocity is this IMU's own" in out
    assert "tracking error: not measured: no velocity commands logged" in out
    assert "joint limit violations: not measured: no joint states" in out
    assert "would not retrain" in out and "system id" in out and "cannot run" in out
    assert not (tmp_path / "runs").exists()  # no registry, no retraining directory
