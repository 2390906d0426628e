"""E-stop and safe modes over real DDS, the node set in separate processes: policy_node's ~/estop (latched topic and
SetBool service) puts the robot in its safe mode within a few control periods and keeps it there until released;
`hold` holds the default pose, `damp` (kp = 0) lets a legged robot sink; sim_bridge_node, standing in for
ros2_control, applies the safe mode itself when joint_commands stop for longer than its cmd_timeout."""

import math
import time

import pytest
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import SetBool

from benchmarks.edge_policies import export_random_policy
from ros_nodes import qos
from tests.campaign_helpers import export_rover_policy
from tests.ros_helpers import node_process, probe_node, spin_until

REAL_TIME = "lockstep:=false"


class Robot:
    """What the probe hears of the robot: odometry, the commands going to the actuators, policy_node's safe mode."""

    def __init__(self, node):
        self.vx, self.z, self.lowest, self.modes, self.commands, self.odoms = 0.0, None, float("inf"), [], 0, 0
        self.xy = (0.0, 0.0)
        node.create_subscription(Odometry, "/odom", self._on_odom, qos.SENSOR)
        # latched, as published: a late joiner gets the mode announced before it matched
        node.create_subscription(
            String, "/safe_mode", lambda m: self.modes.append((time.monotonic(), m.data)), qos.LATCHED
        )
        node.create_subscription(Float64MultiArray, "/joint_commands", lambda m: self._on_command(), 10)
        self.cmd = node.create_publisher(Twist, "/cmd_vel", qos.COMMAND)
        self.estop = node.create_publisher(Bool, "/policy_node/estop", qos.LATCHED)
        self.service = node.create_client(SetBool, "/policy_node/estop")

    def _on_odom(self, msg):
        self.vx, self.z = msg.twist.twist.linear.x, msg.pose.pose.position.z
        self.xy = (msg.pose.pose.position.x, msg.pose.pose.position.y)
        self.lowest = min(self.lowest, self.z)
        self.odoms += 1  # one per control step the bridge takes

    def moved_since(self, xy: tuple[float, float]) -> float:
        """Metres from `xy` to where the odometry last put the robot."""
        return math.dist(xy, self.xy)

    def _on_command(self):
        self.commands += 1

    def drive(self, ex, vx: float, seconds: float, until=None) -> bool:
        """Command vx for `seconds`, or until `until()` holds (then True; discovery may take a while under load)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = Twist()
            msg.linear.x = vx
            self.cmd.publish(msg)
            spin_until(ex, lambda: False, 0.05)
            if until is not None and until():
                return True
        return until is None


def test_estop_holds_the_rover_until_released(tmp_path):
    artifact = export_rover_policy(tmp_path / "policy")
    with (
        node_process("ros_nodes.sim_bridge_node", "robot:=rover", REAL_TIME) as bridge,
        node_process(
            "ros_nodes.policy_node", f"artifact:={artifact}", "allow_unvalidated:=true", "allow_unsigned:=true"
        ) as policy,
        probe_node() as (node, ex),
    ):
        robot = Robot(node)
        assert spin_until(ex, lambda: robot.commands > 10, 30), policy.output
        assert robot.drive(ex, 0.5, 10.0, until=lambda: robot.vx > 0.3), (robot.vx, policy.output)

        engaged = time.monotonic()
        robot.estop.publish(Bool(data=True))
        assert spin_until(ex, lambda: any(m == "hold" for _, m in robot.modes), 5), policy.output
        # announced from the e-stop's own callback, not a later event (how soon: benchmarks/ros_loop_latency's e-stop)
        assert next(t for t, m in robot.modes if m == "hold") - engaged < 1.0
        robot.drive(ex, 0.5, 1.5)  # still commanded forward: the e-stop wins
        assert abs(robot.vx) < 0.05, robot.vx
        assert "e-stop engaged" in policy.output and policy.poll() is None

        assert spin_until(ex, robot.service.service_is_ready, 10)
        future = robot.service.call_async(SetBool.Request(data=False))
        assert spin_until(ex, future.done, 5) and future.result().success
        assert robot.drive(ex, 0.5, 10.0, until=lambda: robot.vx > 0.3), robot.vx  # control back after the release
        assert robot.modes[-1][1] == "", robot.modes
        assert bridge.poll() is None


@pytest.mark.parametrize("mode", ["hold", "damp"])
def test_quadruped_safe_mode_holds_its_stance_or_sinks(tmp_path, mode):
    """An e-stop engaged before the policy runs: the quadruped never gets a policy action. hold keeps the stance at
    full gains; damp (kp = 0, kd kept) lets the base sink slowly instead of snapping anywhere. The bridge's own
    command timeout is off (it holds its start pose until the first command), so the safe mode comes from
    policy_node alone however long it takes to start; the stance is judged over control steps, not wall time."""
    artifact = tmp_path / "policy"
    export_random_policy("quadruped", artifact)
    steps = 125  # 2.5 s of the quadruped's 50 Hz control
    with probe_node() as (node, ex):
        robot = Robot(node)
        robot.estop.publish(Bool(data=True))  # latched: policy_node hears it when it starts
        with (
            node_process("ros_nodes.sim_bridge_node", "robot:=quadruped", REAL_TIME, "cmd_timeout_s:=60.0") as bridge,
            node_process(
                "ros_nodes.policy_node",
                f"artifact:={artifact}",
                "allow_unvalidated:=true",
                "allow_unsigned:=true",
                f"safe_mode:={mode}",
            ) as policy,
        ):
            assert spin_until(ex, lambda: robot.z is not None and robot.commands > 5, 30), policy.output
            assert spin_until(ex, lambda: f"safe mode {mode} (policy_node)" in bridge.output, 10), bridge.output
            start, since = robot.z, robot.odoms
            assert spin_until(ex, lambda: robot.odoms - since >= steps, 30), (robot.odoms, bridge.output[-3000:])
            assert robot.modes and robot.modes[-1][1] == mode, (robot.modes, policy.output[-3000:])
            # standing at its default pose the base is at about 0.31 m
            if mode == "hold":
                assert robot.lowest > 0.28, (start, robot.lowest)
            else:  # it goes down (and the twin resets it once it is on the ground)
                assert robot.lowest < 0.25, (start, robot.lowest)


def test_bridge_applies_the_safe_mode_when_commands_stop(tmp_path):
    """ros2_control's cmd_timeout: policy_node killed mid-run (SIGKILL), the bridge holds within its timeout; a
    new policy_node takes over and the rover tracks again."""
    import signal

    artifact = export_rover_policy(tmp_path / "policy")
    with (
        node_process("ros_nodes.sim_bridge_node", "robot:=rover", REAL_TIME, "cmd_timeout_s:=0.3") as bridge,
        probe_node() as (node, ex),
    ):
        robot = Robot(node)
        with node_process(
            "ros_nodes.policy_node", f"artifact:={artifact}", "allow_unvalidated:=true", "allow_unsigned:=true"
        ) as policy:
            assert spin_until(ex, lambda: robot.commands > 10, 30), policy.output
            assert robot.drive(ex, 0.5, 10.0, until=lambda: robot.vx > 0.3), robot.vx
            policy.send_signal(signal.SIGKILL)
            policy.wait()
            at_kill = robot.xy
            assert spin_until(ex, lambda: "safe mode hold (cmd_timeout)" in bridge.output, 5), bridge.output
            robot.drive(ex, 0.5, 1.0)
            assert abs(robot.vx) < 0.05, robot.vx  # stopped, though /cmd_vel still says forward
            # within the timeout and the braking: at 0.5 m/s, 0.15 m in 0.3 s (the robot's time: a loaded machine
            # slows the bridge's steps and the wall clock alike)
            assert robot.moved_since(at_kill) < 0.5, (at_kill, robot.xy)
        with node_process(
            "ros_nodes.policy_node", f"artifact:={artifact}", "allow_unvalidated:=true", "allow_unsigned:=true"
        ) as policy:
            assert spin_until(ex, lambda: "safe mode left" in bridge.output, 30), bridge.output
            assert robot.drive(ex, 0.5, 10.0, until=lambda: robot.vx > 0.3), robot.vx


def test_robot_stops_when_instruction_node_dies_mid_plan(tmp_path):
    """instruction_node killed (SIGKILL) while a plan drives the rover: policy_node's cmd_vel timeout stops it."""
    import signal

    from std_msgs.msg import String as Text

    from tests.rlhf_helpers import minimal_run

    artifact = export_rover_policy(tmp_path / "policy")
    model = minimal_run()["onnx_dir"]
    with (
        node_process("ros_nodes.sim_bridge_node", "robot:=rover", REAL_TIME),
        node_process(
            "ros_nodes.policy_node",
            f"artifact:={artifact}",
            "allow_unvalidated:=true",
            "allow_unsigned:=true",
            "cmd_timeout_s:=0.5",
        ),
        node_process(
            "ros_nodes.instruction_node", f"model:={model}", f"artifact:={artifact}", "allow_unsigned:=true"
        ) as instruct,
        probe_node() as (node, ex),
    ):
        robot = Robot(node)
        instruction = node.create_publisher(Text, "/instruction", qos.COMMAND)
        assert instruct.wait_for_output("ready", timeout=60), instruct.output
        assert spin_until(ex, lambda: robot.commands > 10, 30)
        assert spin_until(ex, lambda: instruction.get_subscription_count() > 0, 15)  # matched: the one message arrives
        instruction.publish(Text(data="drive forward 5 meters"))  # once: a repeat would preempt the plan it waits for
        assert spin_until(ex, lambda: robot.vx > 0.3, 30), (robot.vx, instruct.output)
        instruct.send_signal(signal.SIGKILL)
        instruct.wait()
        at_kill = robot.xy
        assert spin_until(ex, lambda: abs(robot.vx) < 0.05, 10), robot.vx
        # the cmd_vel timeout (0.5 s, about 0.25 m), then the braking; the plan had about 4 m left to drive
        assert robot.moved_since(at_kill) < 1.0, (at_kill, robot.xy)
