"""policy_node: runs a policy artifact on the robot as a lifecycle (managed) node.

configure loads and verifies the artifact; activate starts the control loop at the manifest's period. Each tick
runs the control step (`controller`: the manifest's observation from the latest /joint_states, /imu/data, /odom and
/cmd_vel, the runtime and its safety filter, the watchdog's safe mode on stale, non-finite or implausible inputs)
and publishes the joint targets (`joint_output`); diagnostics (`diagnostics`) each second and on a change of
state. ~/estop (a latched std_msgs/Bool topic, or the std_srvs/SetBool service) engages the safe mode at once and
keeps it until released; the safe mode (hold or damp, from the manifest) is announced on safe_mode for the
actuator layer. Topic names are relative: a namespace per robot. This file is the ROS side only: parameters
(`policy_params`), transitions, subscriptions, timers, publishing. Imports numpy, the `edge` runtime and rclpy
only: nothing of torch, Ray or MuJoCo.
"""

from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.lifecycle import Node, State, TransitionCallbackReturn
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import SetBool

from edge.errors import ConfigError, EdgeError
from edge.runtime import load_policy
from edge.signing import require_signed, trusted_key_paths
from edge.validation import require_validated
from ros_nodes import qos
from ros_nodes.checks import log_check
from ros_nodes.controller import PolicyController
from ros_nodes.diagnostics import OK, WARN, LoopStatus, diagnostic_array
from ros_nodes.joint_output import JointOutput
from ros_nodes.params import declare, read
from ros_nodes.policy_params import PolicyParams
from ros_nodes.spin import init, spin, start
from ros_nodes.trigger import InstantTrigger


class PolicyNode(Node):
    def __init__(self, **kwargs):
        super().__init__("policy_node", **kwargs)
        declare(self, PolicyParams)
        self.control: PolicyController | None = None
        self._timer = None
        self._subs: list = []
        self._estop = False  # kept across configure/cleanup: an e-stop is released only by its release
        # ~/estop in all states: a latched Bool (true engages, false releases) and a SetBool service alike
        self.create_subscription(Bool, "~/estop", lambda msg: self._set_estop(bool(msg.data), "topic"), qos.LATCHED)
        self.create_service(SetBool, "~/estop", self._on_estop_service)
        # what the actuator layer must do now: "" (follow joint_commands), "hold" or "damp" (kp = 0, kd kept)
        self._pub_mode = self.create_publisher(String, "safe_mode", qos.LATCHED)
        self._mode = None

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            p = self.params = read(self, PolicyParams)
        except ConfigError as e:  # a value outside its choices: one line, the node stays up, unconfigured
            self.get_logger().error(str(e))
            return TransitionCallbackReturn.FAILURE
        try:
            # the signature first: nothing of an artifact nobody trusted is read further
            signature = require_signed(p.artifact, trusted_key_paths(p.trusted_keys), p.allow_unsigned)
            policy = load_policy(p.artifact, p.backend)
            validation = require_validated(policy.manifest, p.allow_unvalidated, p.artifact)
        except (EdgeError, ValueError, OSError) as e:
            self.get_logger().error(f"cannot load artifact {p.artifact!r}: {e}")
            return TransitionCallbackReturn.FAILURE
        for check in (signature, validation):
            log_check(self.get_logger(), check)
        m = policy.manifest
        self.period = 1.0 / p.rate_hz if p.rate_hz > 0 else m.control_period
        self.control = PolicyController(
            policy, p.stale_periods * self.period, p.cmd_timeout_s, [p.max_vx, p.max_vy, p.max_wz], p.gyro_bias
        )
        self.control.estop = self._estop
        self.control.safe_mode = p.safe_mode or self.control.safe_mode
        self.status = LoopStatus()
        self.latest_input = 0.0  # monotonic time of the last input: where a tick's latency starts
        event = p.trigger == "joint_states"
        self.instants = InstantTrigger(self.control.watchdog.needed, self.control.watchdog.stale_s) if event else None
        # input age on the node's clock: under /clock (software in the loop) a slow wall-clock step is not a stale
        # input, the world waits for us; on the robot, monotonic time
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self._out = JointOutput(self, p.output_type, self.control.joint_names)
        self._pub_diag = self.create_lifecycle_publisher(DiagnosticArray, "diagnostics", qos.STATUS)
        self._subs = [
            self.create_subscription(JointState, "joint_states", self._on_joints, qos.SENSOR),
            self.create_subscription(Imu, "imu/data", self._on_imu, qos.SENSOR),
            self.create_subscription(Odometry, "odom", self._on_odom, qos.SENSOR),
            self.create_subscription(
                Twist, "cmd_vel", lambda msg: self.control.inputs.cmd_vel(msg, self._now()), qos.COMMAND
            ),
        ]
        self.get_logger().info(  # "configure successful", as ros2_controllers log it
            f"configure successful: {p.artifact}: {m.robot['name']}, {m.action_dim} joints, "
            f"{1 / self.period:.0f} Hz, {policy.backend} ({policy.reason})"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self.control.reset()
        if self.instants:
            self.instants.reset()
        self._timer = self.create_timer(self.period, self._on_silence if self.instants else self._tick)
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics)
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._announce_mode(self.control.safe_mode)  # leave the robot in its safe mode
        self._out.publish(self.control.safe_output())
        self.destroy_timer(self._timer)
        self.destroy_timer(self._diag_timer)
        self._timer = None
        if self.instants:
            self.instants.reset()
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        self.destroy_lifecycle_publisher(self._out.publisher)
        self.destroy_lifecycle_publisher(self._pub_diag)
        self.control = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        if self._timer is not None:
            self._announce_mode(self.control.safe_mode)
            self._out.publish(self.control.safe_output())
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ inputs
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9 if self._sim_time else time.monotonic()

    def _on_joints(self, msg: JointState) -> None:
        stamp = self.control.inputs.joint_states(msg, self._now())
        if self.instants and self._timer is not None:  # active
            self.instants.state_arrived(stamp)
        self._received()

    def _on_imu(self, msg: Imu) -> None:
        self.control.inputs.imu(msg, self._now())
        self._received()

    def _on_odom(self, msg: Odometry) -> None:
        self.control.inputs.odom(msg, self._now())
        self._received()

    def _received(self) -> None:
        self.latest_input = time.monotonic()
        if self.instants and self.instants.ready(self.control.inputs.header_ns):
            self._tick()

    # ------------------------------------------------------------------ control
    def _on_silence(self) -> None:
        """trigger=joint_states: when /joint_states falls silent, ticks come from here and hold the safe pose."""
        if self.instants.silence(self.get_clock().now().nanoseconds):
            self._tick()

    def _set_estop(self, engaged: bool, source: str) -> None:
        if engaged == self._estop:
            return
        self._estop = engaged
        if engaged:
            self.get_logger().error(f"e-stop engaged ({source}): safe mode until released")
        else:
            self.get_logger().warn(f"e-stop released ({source})")
        if self.control is not None:
            self.control.estop = engaged
            if self._timer is not None:  # active: the safe mode now, not at the next tick
                self._tick()
        if engaged and self.control is not None:  # unconfigured: the mode is the artifact's, announced once active
            self._announce_mode(self.control.safe_mode)

    def _on_estop_service(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self._set_estop(bool(request.data), "service")
        response.success, response.message = True, "e-stop engaged" if request.data else "e-stop released"
        return response

    def _announce_mode(self, mode: str) -> None:
        if mode != self._mode:
            self._mode = mode
            self._pub_mode.publish(String(data=mode))

    def _tick(self) -> None:
        start = time.monotonic()
        self.status.tick(start, self.period)
        if self.instants:
            self.instants.ticked(self.get_clock().now().nanoseconds)
        targets, fault = self.control.step(self._now())
        self._announce_mode("" if fault is None else self.control.safe_mode)
        self._out.publish(targets)
        # latency: from the input that completed the observation; on a fault, from the tick's start
        if self.status.record(fault, time.monotonic() - (self.latest_input if fault is None else start)):
            # one call site per severity: rclpy refuses to change the severity of a call site
            if self.status.level == OK:
                self.get_logger().info(f"{self.status.message}; policy in control")
            elif self.status.level == WARN:
                self.get_logger().warn(f"{self.status.message}; safe mode {self.control.safe_mode}")
            else:
                self.get_logger().error(f"{self.status.message}; safe mode {self.control.safe_mode}")
            self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        policy = self.control.policy
        fields = {
            "backend": policy.backend,
            **self.status.fields(),
            "safety_filter_faults": str(policy.safety.fault_count),
        }
        robot, stamp = policy.manifest.robot["name"], self.get_clock().now().to_msg()
        self._pub_diag.publish(
            diagnostic_array("policy_node", self.status.level, self.status.message, robot, fields, stamp)
        )


def main(args: list[str] | None = None) -> None:
    init(args)
    node = start("policy_node", PolicyNode)
    if node.get_parameter("autostart").value and node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
        node.trigger_activate()
    spin(node, node.get_parameter("executor").value)


if __name__ == "__main__":
    main()
