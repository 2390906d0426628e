"""The hard field robot (sim.field_robot): its YAML is checked with the file named, each effect does what it says
on the twin's model, commands and sensors, and together they leave a reality gap that no twin parameter closes."""

import subprocess
import sys

import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Imu

from edge.resources import config_path
from sim.controllers import DiffDriveController
from sim.errors import SimError
from sim.field_robot import FieldEffects, FieldRobot, FieldRobotConfig, load_field_robot
from sim.randomization import RandomizationConfig, fixed_params
from sim.twin import BatchedTwin
from tests.ros_helpers import node_process, probe_node, ros_env, spin_until
from training.retrain.field_drive import drive_field_log
from training.retrain.sysid import SysIdConfig, identify, log_windows, replay_errors

HARD = config_path("retrain") / "field_robot_hard.yaml"
HARD_QUADRUPED = config_path("retrain") / "field_robot_hard_quadruped.yaml"
SCRIPT = [(1.0, 0.8, 0.0), (1.0, 0.0, 1.2), (1.0, -0.5, 0.0), (1.0, 0.4, -1.0)]


def twin(robot: str = "rover") -> BatchedTwin:
    t = BatchedTwin(robot, num_envs=1, seed=3, randomization=RandomizationConfig(enabled=False)).hold_commands()
    t.reset()
    return t


@pytest.mark.parametrize("path", [HARD, HARD_QUADRUPED], ids=lambda p: p.name)
def test_the_shipped_hard_field_robots_load(path):
    config = load_field_robot(path)
    assert config.hidden and config.effects != FieldEffects()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("payload_kg: 1.0\neffects: {motor_lag: 0.1}\n", "motor_lag"),
        ("gravity: 3\n", "gravity"),
        ("effects: [1, 2]\n", "effects must be a mapping"),
        ("effects: {odom_slip: 0.9}\n", "odom_slip"),
        ("effects: {gyro_bias: [0.1]}\n", "gyro_bias"),
        ("effects: {latency_jitter_s: -0.01}\n", "latency_jitter_s"),
    ],
)
def test_a_bad_field_robot_is_refused_naming_the_file_and_the_key(tmp_path, text, says):
    path = tmp_path / "field.yaml"
    path.write_text(text)
    with pytest.raises(SimError, match=says) as refused:
        load_field_robot(path)
    assert str(path) in str(refused.value)


def test_joint_friction_armature_and_an_off_centre_payload_are_twin_parameters_of_one_env():
    """The hard robots' friction, rotor inertia and payload offset are twin parameters (system identification can
    fit them): set on one env's model fields, with the other env left as it was, and nominal again after a nominal
    reset."""
    t = BatchedTwin("rover", num_envs=2, seed=3, randomization=RandomizationConfig(enabled=False))
    m = t.backend.model(0)
    base, joints = m.body(t.spec.base_body).id, [m.joint(j).dofadr[0] for j in t.spec.joints]
    before = m.body_ipos[base].copy()
    hidden = {"payload_kg": 3.0, "payload_com_x": 0.1, "payload_com_z": 0.05, "joint_friction": 0.3}
    hidden["joint_armature"] = 0.01
    armature = m.dof_armature.copy()
    t.set_params(fixed_params(hidden, t.spec.physics_dt), np.array([0]))
    m, other = t.backend.model(0), t.backend.model(1)
    assert np.all(m.dof_frictionloss[joints] == 0.3)  # the rover's MJCF has none of its own
    assert np.count_nonzero(m.dof_frictionloss) == len(joints)  # the base's free joint has none
    np.testing.assert_allclose(m.dof_armature[joints], armature[joints] + 0.01)  # the MJCF's 0.005 and more
    assert np.all(np.delete(m.dof_armature, joints) == np.delete(armature, joints))
    np.testing.assert_allclose(m.body_ipos[base] - before, 3.0 / m.body_mass[base] * np.array([0.1, 0.0, 0.05]))
    assert not np.any(other.dof_frictionloss) and np.all(other.body_ipos[base] == before)
    assert np.all(other.dof_armature == armature)
    t.set_params(fixed_params({}, t.spec.physics_dt), np.array([0]))
    m = t.backend.model(0)
    assert not np.any(m.dof_frictionloss) and np.all(m.body_ipos[base] == before)
    assert np.all(m.dof_armature == armature)


def test_the_delay_jitters_from_one_control_period_to_the_next_within_its_bound():
    """Each period's commands are late by the hidden delay plus 0 to latency_jitter_s, in whole physics steps, each
    value as likely; the twin's own delay stays what the hidden parameters say."""
    t = twin()
    dt = t.spec.physics_dt
    robot = FieldRobot(t, FieldRobotConfig({"latency_s": 4 * dt}, FieldEffects(latency_jitter_s=3 * dt)))
    late = []
    for _ in range(800):
        robot.next_period()
        t.step(np.zeros((1, 2)))
        late.append(int(t.params.latency_steps[0]))
    counts = np.bincount(late, minlength=8)[4:]
    assert sum(counts) == len(late) and np.all(counts > 150), counts  # 4 to 7 steps, about 200 each
    assert np.any(np.diff(late) != 0)  # it changes between periods
    assert robot.params.latency_steps[0] == 4


def test_a_jittered_delay_is_a_gap_that_the_true_delay_cannot_replay():
    hidden = {"latency_s": 0.04}
    spec, steady = drive_and_log(FieldRobotConfig(hidden))
    _, jittered = drive_and_log(FieldRobotConfig(hidden, FieldEffects(latency_jitter_s=0.04)))
    assert replay_errors(spec, steady, [hidden])[0] < 1e-12
    assert replay_errors(spec, jittered, [hidden])[0] > 1e-5


def test_sensors_read_with_bias_offset_slip_and_noise():
    effects = FieldEffects(gyro_bias=(0.0, 0.0, 0.02), gyro_noise=0.01, odom_slip=0.05, encoder_offset_rad=0.01)
    robot = FieldRobot(twin(), FieldRobotConfig(effects=effects))
    gyro = np.array([robot.sense_gyro(np.zeros(3)) for _ in range(4000)])
    np.testing.assert_allclose(gyro.mean(0), [0.0, 0.0, 0.02], atol=0.001)
    np.testing.assert_allclose(gyro.std(0), 0.01, rtol=0.1)
    lin, ang = robot.sense_odometry(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.5]))
    np.testing.assert_allclose(lin, [0.95, 0.0, 0.0])
    np.testing.assert_allclose(ang, [0.0, 0.0, 0.5])
    np.testing.assert_allclose(robot.sense_joints(np.zeros(2)), [0.01, 0.01])


def drive_and_log(config: FieldRobotConfig) -> tuple:
    """The rover driven through SCRIPT by its hand-written controller on the field robot; replay windows of its
    log."""
    t = twin()
    robot, controller = FieldRobot(t, config), DiffDriveController(t)
    log = drive_field_log(robot, lambda: controller()[0], command_at, sum(s for s, _, _ in SCRIPT))
    return t.spec, log_windows([log], 0.1, 12)


def command_at(t: float) -> np.ndarray:
    for seconds, vx, wz in SCRIPT:
        if t < seconds:
            return np.array([vx, 0.0, wz])
        t -= seconds
    return np.zeros(3)


def test_the_hard_robot_leaves_a_gap_that_no_twin_parameter_closes():
    """Without its effects the hard robot's true hidden parameters replay its log exactly; with them they do not,
    and identification ends above zero, as it would on a real robot."""
    hidden = {"payload_kg": 3.0, "latency_s": 0.02}
    spec, easy = drive_and_log(FieldRobotConfig(hidden))
    _, hard = drive_and_log(FieldRobotConfig(hidden, load_field_robot(HARD).effects))
    assert replay_errors(spec, easy, [hidden])[0] < 1e-12
    gap = replay_errors(spec, hard, [hidden])[0]
    assert gap > 1e-3
    result = identify(spec, hard, SysIdConfig(params=("payload_kg", "latency_s"), population=8, generations=10))
    assert 0 < result.error_after <= gap  # better than the true hidden values can do, never exact


def test_the_bridge_reads_its_imu_as_the_hard_robot_does(tmp_path):
    """sim_bridge_node with the hard field robot: the standing rover's gyro reads the yaw bias; a field robot YAML
    with an unknown effect stops the node with one line that names it."""
    with (
        node_process("ros_nodes.sim_bridge_node", f"field_twin:={HARD}") as proc,
        probe_node() as (node, ex),
    ):
        yaw = []
        node.create_subscription(Imu, "/imu/data", lambda m: yaw.append(m.angular_velocity.z), qos_profile_sensor_data)
        assert spin_until(ex, lambda: len(yaw) >= 100, 60), proc.output
        assert np.mean(yaw[-100:]) == pytest.approx(0.02, abs=0.005)
    bad = tmp_path / "bad.yaml"
    bad.write_text("effects: {motor_lag: 0.1}\n")
    args = [sys.executable, "-m", "ros_nodes.sim_bridge_node", "--ros-args", "-p", f"field_twin:={bad}"]
    out = subprocess.run(args, env=ros_env(), capture_output=True, text=True, timeout=60)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2 and "motor_lag" in lines[-1] and "Traceback" not in out.stderr, lines
