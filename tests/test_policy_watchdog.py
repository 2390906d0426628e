"""policy_node's logic without DDS: message -> observation values (ros_nodes.policy_inputs), the watchdog's
decisions (ros_nodes.watchdog), the joint_states trigger (ros_nodes.trigger), the diagnostics' counters and the
control step on a real ONNX artifact (ros_nodes.controller). Real messages, no node, no DDS: the same objects
tests/test_policy_node.py drives over DDS."""

import math

import numpy as np
import pytest
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState

from benchmarks.edge_policies import export_random_policy
from edge.observation import DEFAULT_TERMS, ObservationLayout, obs_term
from edge.runtime import load_policy
from ros_nodes.controller import PolicyController
from ros_nodes.diagnostics import ERROR, OK, WARN, LoopStatus
from ros_nodes.policy_inputs import PolicyInputs, command_limits
from ros_nodes.trigger import InstantTrigger
from ros_nodes.watchdog import Fault, Watchdog

JOINTS = ["hip", "knee"]
DEFAULT_POSE = np.array([0.1, -0.2])
STALE_S = 0.04
LIMITS = (np.array([-1.0, -0.5, -2.0]), np.array([1.0, 0.5, 2.0]))


def joint_states(names=("hip", "knee"), position=(0.3, 0.4), velocity=(1.0, 2.0), sec=0):
    msg = JointState(name=list(names), position=list(position), velocity=list(velocity))
    msg.header.stamp.sec = sec
    return msg


def imu(wz=0.1, sec=0):
    msg = Imu()
    msg.orientation.w = 1.0
    msg.angular_velocity.z = wz
    msg.header.stamp.sec = sec
    return msg


def odom(vx=0.3, sec=0):
    msg = Odometry()
    msg.twist.twist.linear.x = vx
    msg.header.stamp.sec = sec
    return msg


def twist(vx=0.0, vy=0.0, wz=0.0):
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.angular.z = vx, vy, wz
    return msg


@pytest.fixture
def inputs():
    """A position-controlled robot's inputs, all of them in at t = 0."""
    i = PolicyInputs(JOINTS, DEFAULT_POSE, *LIMITS)
    i.joint_states(joint_states(), 0.0)
    i.imu(imu(), 0.0)
    i.odom(odom(), 0.0)
    return i


@pytest.fixture
def watchdog():
    return Watchdog(ObservationLayout([obs_term(n, len(JOINTS)) for n in DEFAULT_TERMS["position"]]), STALE_S)


def verdict(watchdog, inputs, now=0.0):
    """What the node does at a tick: stale first, then the assembled observation's bounds."""
    stale = watchdog.stale(inputs.received, now)
    if stale:
        return stale
    values = inputs.observation_values(now, 0.5, np.zeros(len(JOINTS)))
    return watchdog.invalid(watchdog.layout.assemble(values), values)


# ------------------------------------------------------------------------------------------ inputs
def test_joints_are_reordered_by_name_and_relative_to_the_default_pose(inputs):
    inputs.joint_states(
        joint_states(names=("knee", "hip", "wheel"), position=(0.4, 0.3, 9.0), velocity=(2.0, 1.0, 5.0)), 0
    )
    assert np.allclose(inputs.values["joint_pos"], [0.3 - 0.1, 0.4 + 0.2])
    assert np.allclose(inputs.values["joint_vel"], [1.0, 2.0])
    inputs.joint_states(joint_states(), 0)  # the driver changed its order: looked up again
    assert np.allclose(inputs.values["joint_vel"], [1.0, 2.0])


@pytest.mark.parametrize(
    "msg",
    [
        joint_states(names=("hip",), position=(0.3,), velocity=(1.0,)),  # a joint missing
        joint_states(velocity=(1.0,)),  # a field of the wrong size
        joint_states(velocity=()),  # a driver that sends no velocities
        joint_states(position=(0.3, 0.4, 0.5)),
    ],
    ids=["missing joint", "short velocity", "no velocity", "long position"],
)
def test_joint_states_that_cannot_fill_the_terms_are_a_fault(inputs, watchdog, msg):
    inputs.joint_states(msg, 0.0)
    assert np.isnan(inputs.values["joint_pos"]).all() and np.isnan(inputs.values["joint_vel"]).all()
    assert verdict(watchdog, inputs) == "non-finite joint_pos"
    inputs.joint_states(joint_states(), 0.0)  # a good message again: good again
    assert verdict(watchdog, inputs) is None


def test_imu_and_odom_become_their_terms(inputs):
    inputs.imu(imu(wz=0.7), 1.0)
    inputs.odom(odom(vx=-0.2), 1.0)
    assert np.allclose(inputs.values["projected_gravity"], [0, 0, -1])
    assert np.allclose(inputs.values["base_ang_vel"], [0, 0, 0.7])
    assert np.allclose(inputs.values["base_lin_vel"], [-0.2, 0, 0])
    assert inputs.received["imu"] == inputs.received["odom"] == 1.0


def test_a_calibrated_gyro_bias_is_taken_off_the_imu():
    calibrated = PolicyInputs(JOINTS, DEFAULT_POSE, *LIMITS, gyro_bias=np.array([0.0, 0.01, 0.02]))
    calibrated.imu(imu(wz=0.7), 1.0)
    assert np.allclose(calibrated.values["base_ang_vel"], [0.0, -0.01, 0.68])


def test_commands_are_clamped_non_finite_ones_dropped_and_old_ones_zero(inputs):
    inputs.cmd_vel(twist(vx=3.0, vy=-0.2, wz=-9.0), now=1.0)
    assert np.allclose(inputs.command, [1.0, -0.2, -2.0])
    inputs.cmd_vel(twist(vx=math.nan), now=1.2)  # dropped: the last good command stays, with its time
    assert np.allclose(inputs.observation_values(1.4, 0.5, np.zeros(2))["velocity_command"], [1.0, -0.2, -2.0])
    assert np.allclose(inputs.observation_values(1.6, 0.5, np.zeros(2))["velocity_command"], 0.0)  # timed out


def test_command_limit_overrides_only_narrow_the_manifests():
    low, high = command_limits({"vx": [-1.0, 2.0], "vy": [-0.5, 0.5], "wz": [-1.5, 1.5]}, [1.0, 0.0, 3.0])
    assert low.tolist() == [-1.0, -0.5, -1.5] and high.tolist() == [1.0, 0.5, 1.5]


# ------------------------------------------------------------------------------------------ watchdog
def test_good_inputs_pass(inputs, watchdog):
    assert watchdog.needed == ["imu", "joint_states", "odom"]
    assert verdict(watchdog, inputs) is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("term", ["joint_pos", "joint_vel", "base_ang_vel", "base_lin_vel"])
def test_non_finite_values_are_a_fault_naming_the_input(inputs, watchdog, term, bad):
    if term.startswith("joint"):
        values = {"position": (bad, 0.4)} if term == "joint_pos" else {"velocity": (1.0, bad)}
        inputs.joint_states(joint_states(**values), 0.0)
    elif term == "base_ang_vel":
        inputs.imu(imu(wz=bad), 0.0)
    else:
        inputs.odom(odom(vx=bad), 0.0)
    # an infinite joint position too: its term has no range, yet the bound test must not pass Inf
    assert verdict(watchdog, inputs) == f"non-finite {term}"


@pytest.mark.parametrize(
    ("msg", "reason"),
    [
        (imu(wz=1e30), "base_ang_vel out of range (|value| > 30)"),
        (imu(wz=30.5), "base_ang_vel out of range (|value| > 30)"),
        (odom(vx=-1e30), "base_lin_vel out of range (|value| > 10)"),
        (joint_states(velocity=(1e30, 0.0)), "joint_vel out of range (|value| > 100)"),
        (joint_states(velocity=(0.0, 1e40)), "joint_vel out of range (|value| > 100)"),  # inf in float32
    ],
)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 1e40 as float32
def test_implausible_values_are_a_fault(inputs, watchdog, msg, reason):
    {JointState: inputs.joint_states, Imu: inputs.imu, Odometry: inputs.odom}[type(msg)](msg, 0.0)
    assert verdict(watchdog, inputs) == reason


def test_plausible_extremes_pass(inputs, watchdog):
    inputs.imu(imu(wz=29.9), 0.0)
    inputs.odom(odom(vx=-9.9), 0.0)
    inputs.joint_states(joint_states(position=(1e4, -1e4), velocity=(99.0, -99.0)), 0.0)  # a wheel's angle: no range
    assert verdict(watchdog, inputs) is None


def test_stale_and_missing_inputs_are_named(inputs, watchdog):
    assert verdict(watchdog, inputs, now=STALE_S) is None  # exactly the stale time: still fresh
    inputs.imu(imu(), 0.03)
    inputs.odom(odom(), 0.03)
    assert verdict(watchdog, inputs, now=0.05) == "stale input: joint_states (older than 40 ms)"
    fresh = PolicyInputs(JOINTS, DEFAULT_POSE, *LIMITS)
    fresh.imu(imu(), 0.0)
    assert verdict(watchdog, fresh) == "stale input: joint_states, odom (older than 40 ms)"  # never came


def test_a_stale_input_wins_over_a_bad_value(inputs, watchdog):
    inputs.imu(imu(wz=math.nan), 0.0)
    assert verdict(watchdog, inputs, now=1.0).startswith("stale input: imu, joint_states, odom")


# ------------------------------------------------------------------------------------------ trigger
def test_one_tick_per_instant_once_every_input_of_it_is_in():
    trigger, stamps = InstantTrigger(["imu", "joint_states", "odom"], STALE_S), {}
    s100, s101 = 100 * 10**9, 101 * 10**9
    stamps.update(imu=s100, odom=s100, joint_states=s100)
    trigger.state_arrived(s100)
    assert trigger.ready(stamps) and not trigger.ready(stamps)  # once
    trigger.state_arrived(s100)  # the same state sent again: no second tick
    assert not trigger.ready(stamps)
    stamps["joint_states"] = s101
    trigger.state_arrived(s101)
    assert not trigger.ready(stamps)  # /imu/data and /odom of that instant still missing
    stamps["imu"] = s101
    assert not trigger.ready(stamps)
    stamps["odom"] = s101 + 1  # a later one counts too
    assert trigger.ready(stamps)
    trigger.state_arrived(0)  # a driver without stamps: every message is an instant
    assert trigger.ready(stamps)
    trigger.state_arrived(0)
    assert trigger.ready(stamps)


def test_silence_is_measured_from_the_last_tick_on_the_nodes_clock():
    trigger = InstantTrigger(["joint_states"], STALE_S)
    assert trigger.silence(0)  # no tick yet
    trigger.ticked(1_000_000_000)
    assert not trigger.silence(1_000_000_000 + 40_000_000)
    trigger.state_arrived(5)
    assert trigger.silence(1_000_000_000 + 41_000_000) and trigger.due_ns is None  # the silent instant is dropped
    trigger.state_arrived(2_000_000_000)
    assert trigger.ready({"joint_states": 2_000_000_000})
    trigger.ticked(1_900_000_000)  # the /clock message of the instant ticked on not served yet: the instant counts
    assert not trigger.silence(2_000_000_000 + 40_000_000)


# ------------------------------------------------------------------------------------------ diagnostics
def test_loop_status_counts_misses_and_faults_and_reports_level_changes():
    status = LoopStatus()
    for t in (0.0, 0.02, 0.04, 0.071, 0.09):
        status.tick(t, 0.02)
    assert status.ticks == 5 and status.deadline_misses == 1  # 31 ms > 1.5 periods
    assert status.level == WARN and status.record(None, 0.002) and status.level == OK
    assert not status.record(None, 0.004)
    assert status.record(Fault("non-finite joint_pos", stale=False), 0.001) and status.level == ERROR
    assert not status.record(Fault("non-finite base_ang_vel", stale=False), 0.001)
    assert status.message == "non-finite joint_pos"  # the reason the level changed for
    fields = status.fields()
    assert fields["fault_ticks"] == "2" and fields["latency_p50_ms"] == "1.500" and fields["deadline_misses"] == "1"


# ------------------------------------------------------------------------------------------ control step
@pytest.fixture(scope="module")
def rover(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifact") / "policy"
    export_random_policy("rover", out)
    return out


def test_control_step_on_a_real_artifact_holds_the_safe_pose_on_faults_and_recovers(rover):
    control = PolicyController(load_policy(rover, "onnxruntime"), STALE_S, 0.5, [0.0, 0.0, 0.0])
    wheels = control.joint_names
    targets, fault = control.step(0.0)
    assert fault == Fault("stale input: imu, joint_states, odom (older than 40 ms)", stale=True)
    assert np.array_equal(targets, control.safe_targets)

    def send(now, wz=0.1):
        control.inputs.joint_states(joint_states(names=wheels, position=(0.0, 0.0), velocity=(1.0, 1.2)), now)
        control.inputs.imu(imu(wz=wz), now)
        control.inputs.odom(odom(), now)

    send(1.0)
    control.inputs.cmd_vel(twist(vx=0.5), 1.0)
    targets, fault = control.step(1.0)
    assert fault is None
    reference = load_policy(rover, "onnxruntime")  # the same artifact, same observation: the same action
    values = {**control.inputs.values, "velocity_command": np.array([0.5, 0, 0]), "last_action": np.zeros(2)}
    expected = control.offset + control.scale * reference.act(control.layout.assemble(values))
    assert np.allclose(targets, expected, atol=1e-6) and not np.allclose(targets, control.safe_targets)

    send(1.02, wz=math.nan)
    targets, fault = control.step(1.02)
    assert fault == Fault("non-finite base_ang_vel", stale=False)
    assert np.array_equal(targets, control.safe_targets)
    assert np.array_equal(control.last_action, control.policy.safety.safe_action)  # what the next tick sees
    send(1.04)
    assert control.step(1.04)[1] is None
