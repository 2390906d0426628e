"""sim_bridge_node: plays the robot. Steps one twin and speaks the robot's ROS interface: publishes
joint_states, imu/data and odom (sensor-data QoS), and for a robot with feet foot_forces (each foot's contact force
in N, in the robot YAML's `feet` order, as a legged robot's foot force sensors report it), and applies
joint_commands as PD targets.

It stands in for ros2_control too: in real time, when joint_commands stop for longer than `cmd_timeout_s` (the
cmd_timeout of ros2_control's controllers), it applies the robot's safe mode (`hold`: the default pose at full
gains; `damp`: kp = 0, kd kept) until commands come back; and it follows policy_node's `safe_mode` topic
(hold or damp while the node is in its safe mode, "" to follow the commands again).

Real time (default): one control period per wall-clock period. Lockstep (`lockstep: true`): the bridge owns
time, publishes /clock, and takes the next step as soon as the command for the current one arrives (a state
left unanswered for `lockstep_timeout_s` is sent again), so a software-in-the-loop run goes as fast as the nodes
compute, one command per step. A "field twin" file
gives hidden physical offsets (friction, payload, latency, ...) that stand in for the real robot.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from builtin_interfaces.msg import Time
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String

from edge.manifest import SAFE_MODES
from edge.observation import rotate_world_to_base
from ros_nodes import qos
from ros_nodes.params import declare, read
from ros_nodes.sim_bridge_params import SimBridgeParams
from ros_nodes.spin import init, spin, start
from sim.field_robot import FieldRobot, load_field_robot
from sim.randomization import PhysicsParams, RandomizationConfig
from sim.robot import load_robot
from sim.twin import BatchedTwin


def to_time_msg(nanoseconds: int) -> Time:
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


class SimBridge(Node):
    def __init__(self, **kwargs):
        super().__init__("sim_bridge_node", **kwargs)
        declare(self, SimBridgeParams)
        p = read(self, SimBridgeParams)  # a safe_mode outside its choices: one line
        self.lockstep, self.timeout_s, self.cmd_timeout_s = p.lockstep, p.lockstep_timeout_s, p.cmd_timeout_s
        # the robot moves on its MJCF's own physics, whatever cheaper physics its YAML trains on
        self.twin = BatchedTwin(
            load_robot(p.robot).with_mjcf_physics(),
            num_envs=1,
            seed=p.seed,
            randomization=RandomizationConfig(enabled=False),
            nthread=0,
        ).hold_commands()
        self.twin.reset()
        config = load_field_robot(p.field_twin)
        if p.field_twin:
            self.get_logger().info(f"field robot: {config.hidden}, effects {config.effects}")
        spec = self.twin.spec
        self.field = FieldRobot(self.twin, config)  # the "real robot": its hidden parameters and effects
        self.safe_mode = p.safe_mode or spec.safe_mode  # the robot YAML's is one of SAFE_MODES (sim.robot checks)
        self.mode = ""  # "" follows joint_commands; hold or damp while in a safe mode
        self._timed_out = False  # the safe mode came from a command timeout (left when commands resume)
        self.timeouts = 0  # times joint_commands went silent for longer than cmd_timeout_s
        self._last_command_wall = time.monotonic()
        self.dt_ns = int(round(spec.control_dt * 1e9))
        self.sim_time_ns = 0
        self.action = self.twin.safe_action()
        self.falls = 0
        self.bad_commands = 0
        self.resends = 0  # lockstep: states sent again because no command answered them
        self._last_publish_wall = time.monotonic()
        self._accel_world = np.zeros(3)  # base acceleration over the last step

        self.pub_joints = self.create_publisher(JointState, "joint_states", qos.SENSOR)
        self.pub_imu = self.create_publisher(Imu, "imu/data", qos.SENSOR)
        self.pub_odom = self.create_publisher(Odometry, "odom", qos.SENSOR)
        # the twin senses feet only for a robot with feet on a backend that has them (BatchedTwin.feet)
        self.pub_feet = None
        if self.twin.feet is not None:
            self.pub_feet = self.create_publisher(Float64MultiArray, "foot_forces", qos.SENSOR)
        self.pub_clock = self.create_publisher(Clock, "/clock", 10) if self.lockstep else None
        self.create_subscription(Float64MultiArray, "joint_commands", self._on_command, qos.COMMAND)
        self.create_subscription(String, "safe_mode", lambda msg: self._set_mode(msg.data, "policy_node"), qos.LATCHED)
        # lockstep steps on each command (a polling timer would burn a core) and checks now and then for a
        # state nobody answered; real time steps at the control period
        if self.lockstep:
            self.create_timer(self.timeout_s / 4, self._on_silence)
        else:
            self.create_timer(spec.control_dt, self._step_real_time)
        self._publish()

    def _on_command(self, msg: Float64MultiArray) -> None:
        targets = np.asarray(msg.data, dtype=np.float64)
        if targets.shape != (self.twin.spec.num_actions,) or not np.all(np.isfinite(targets)):
            self.bad_commands += 1
            self.get_logger().warn(
                f"ignored /joint_commands of {targets.size} values (expected "
                f"{self.twin.spec.num_actions} finite targets); holding the last one",
                throttle_duration_sec=1.0,
            )
            return
        self.action = self.twin.actions_from_targets(targets)
        self._last_command_wall = time.monotonic()
        if self.mode and self._timed_out:  # commands are back after a timeout: follow them again
            self._set_mode("", "joint_commands resumed")
        if self.lockstep:
            self._step()

    def _on_silence(self) -> None:
        # Send the same state again rather than step without a command: the first one may have gone out before the
        # policy subscribed, or a sample was lost (best effort). Stepping would put an extra command-less step
        # between the policy and the twin, after which every command would land one step late.
        if time.monotonic() - self._last_publish_wall >= self.timeout_s:
            self.resends += 1
            self.get_logger().warn(
                f"no /joint_commands for {self.timeout_s:g} s: sending the state again ({self.resends} so far)",
                throttle_duration_sec=5.0,
            )
            self._send(self._sensed)

    def _set_mode(self, mode: str, why: str) -> None:
        """Enter a safe mode (hold, damp) or leave it (""); damp drops kp to 0 and keeps kd, hold commands the default
        pose at the robot's gains."""
        if mode not in ("", *SAFE_MODES) or mode == self.mode:
            return
        self.mode, self._timed_out = mode, why == "cmd_timeout"
        self.twin.set_params(self._params())
        if mode == "hold":
            self.action = self.twin.safe_action()
        self.get_logger().warn(f"safe mode {mode} ({why})" if mode else f"safe mode left ({why})")

    def _params(self) -> PhysicsParams:
        """The field twin's physics, with kp = 0 while damping."""
        if self.mode == "damp":
            return dataclasses.replace(self.field.params, kp_scale=np.zeros_like(self.field.params.kp_scale))
        return self.field.params

    def _step_real_time(self) -> None:
        if not self.mode and time.monotonic() - self._last_command_wall > self.cmd_timeout_s:
            self.timeouts += 1
            self._set_mode(self.safe_mode, "cmd_timeout")
        self._step()

    def _step(self) -> None:
        lin_vel_before = self.twin.backend.state()["base_lin_vel"][0]
        self.field.next_period()
        _, _, terminated, _, _ = self.twin.step(self.action[None])
        self._accel_world = (self.twin.backend.state()["base_lin_vel"][0] - lin_vel_before) / self.twin.spec.control_dt
        if terminated[0]:
            self.falls += 1
            self.get_logger().warn(f"robot fell (fall {self.falls}); twin reset to its start pose")
            self.twin.set_params(self._params())  # a reset draws the twin's nominal physics: the field's stay
        self.sim_time_ns += self.dt_ns
        self._publish()

    def _publish(self) -> None:
        """Sense the twin's state (the field's sensor effects draw their noise here, once per instant) and send it."""
        self._sensed = self._sense()
        self._send(self._sensed)

    def _send(self, sensed: list[tuple]) -> None:
        """Send sensed messages; in lockstep /clock first. A state sent again is the same messages: new noise
        would make a run's noise depend on how often the bridge had to resend (while the nodes connect, under load)."""
        self._last_publish_wall = time.monotonic()
        if self.lockstep:
            self.pub_clock.publish(Clock(clock=to_time_msg(self.sim_time_ns)))
        for publisher, msg in sensed:
            publisher.publish(msg)

    def _sense(self) -> list[tuple]:
        """(publisher, message) for the twin's state now, /odom last."""
        spec, state = self.twin.spec, self.twin.backend.state()
        stamp = to_time_msg(self.sim_time_ns) if self.lockstep else self.get_clock().now().to_msg()
        quat = state["base_quat"][0]  # w, x, y, z
        lin_base = rotate_world_to_base(state["base_quat"], state["base_lin_vel"])[0]
        ang_base = state["base_ang_vel"][0]
        odom_lin, odom_ang = self.field.sense_odometry(lin_base, ang_base)

        joints = JointState()
        joints.header.stamp = stamp
        joints.name = list(spec.joints)
        joints.position = self.field.sense_joints(state["joint_pos"][0]).tolist()
        joints.velocity = state["joint_vel"][0].tolist()
        sensed = [(self.pub_joints, joints)]

        imu = Imu()
        imu.header.stamp = stamp
        imu.header.frame_id = "imu_link"
        imu.orientation.w, imu.orientation.x, imu.orientation.y, imu.orientation.z = (float(v) for v in quat)
        gyro = self.field.sense_gyro(ang_base)
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = (float(v) for v in gyro)
        # specific force: acceleration minus gravity, in the base frame (what an accelerometer reads)
        acc = rotate_world_to_base(state["base_quat"], (self._accel_world + [0.0, 0.0, 9.81])[None])[0]
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = (float(v) for v in acc)
        sensed.append((self.pub_imu, imu))

        if self.pub_feet is not None:
            forces = self.twin.backend.feet()["contact_force"][0]
            sensed.append((self.pub_feet, Float64MultiArray(data=[float(f) for f in forces])))

        # /odom last: a logger that aligns each control step on /odom (training.retrain.ingest) then finds the
        # step's /joint_states and /imu/data already written
        odom = Odometry()
        odom.header.stamp = stamp
        odom.header.frame_id = "odom"
        odom.child_frame_id = "base_link"
        pos = state["base_pos"][0]
        odom.pose.pose.position.x, odom.pose.pose.position.y, odom.pose.pose.position.z = (float(v) for v in pos)
        o = odom.pose.pose.orientation
        o.w, o.x, o.y, o.z = (float(v) for v in quat)
        odom.twist.twist.linear.x, odom.twist.twist.linear.y, odom.twist.twist.linear.z = (float(v) for v in odom_lin)
        a = odom.twist.twist.angular
        a.x, a.y, a.z = (float(v) for v in odom_ang)
        sensed.append((self.pub_odom, odom))
        return sensed


def main(args: list[str] | None = None) -> None:
    init(args)
    node = start("sim_bridge_node", SimBridge)  # a bad robot, field twin or safe mode: one line, exit 2
    spin(node, on_exit=node.twin.close)


if __name__ == "__main__":
    main()
