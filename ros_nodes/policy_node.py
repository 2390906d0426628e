"""policy_node: runs a policy artifact on the robot as a lifecycle (managed) node.

configure loads and verifies the artifact; activate starts the control timer at the manifest's period. Each
tick builds the observation from the latest /joint_states, /imu/data, /odom and /cmd_vel exactly as the
manifest lays it out, runs the runtime and its safety filter, and publishes joint targets on /joint_commands
(the input of ros2_control's forward_command_controller). A watchdog commands the safe pose while an input is
stale, non-finite or out of range, reports it on /diagnostics, and hands back to the policy once inputs are
good again. Imports numpy, the `edge` runtime and rclpy only: nothing of torch, Ray or MuJoCo.
"""

from __future__ import annotations

import array
import time
from collections import deque

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.lifecycle import Node, State, TransitionCallbackReturn
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from edge.errors import ArtifactError, BackendUnavailable
from edge.observation import ObservationLayout, projected_gravity_one
from edge.runtime import BACKENDS, load_policy
from edge.validation import require_validated
from ros_nodes.params import describe

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
# beyond these an input is a sensor fault, not a state the robot can be in
PLAUSIBLE = {"base_lin_vel": 10.0, "base_ang_vel": 30.0, "joint_vel": 100.0}
SOURCES = {  # observation term -> the input it comes from
    "base_lin_vel": "odom",
    "base_ang_vel": "imu",
    "projected_gravity": "imu",
    "joint_pos": "joint_states",
    "joint_vel": "joint_states",
}


class PolicyNode(Node):
    def __init__(self, **kwargs):
        super().__init__("policy_node", **kwargs)
        self.declare_parameter("artifact", "", describe("policy artifact directory (policy.onnx + manifest.json)"))
        self.declare_parameter("backend", "auto", describe(f"inference backend: {', '.join(BACKENDS)}"))
        self.declare_parameter("rate_hz", 0.0, describe("control rate override; 0 = the manifest's", low=0, high=2000))
        self.declare_parameter(
            "stale_periods",
            2,
            describe("inputs older than this many control periods are stale", low=1, high=100, integer=True),
        )
        self.declare_parameter(
            "cmd_timeout_s", 0.5, describe("/cmd_vel older than this means stop (zero command)", low=0.01, high=60.0)
        )
        self.declare_parameter("max_vx", 0.0, describe("|vx| command limit (m/s); 0 = the manifest's", low=0, high=10))
        self.declare_parameter("max_vy", 0.0, describe("|vy| command limit (m/s); 0 = the manifest's", low=0, high=10))
        self.declare_parameter(
            "max_wz", 0.0, describe("|wz| command limit (rad/s); 0 = the manifest's", low=0, high=20)
        )
        self.declare_parameter(
            "output_type", "float64_array", describe("float64_array (forward_command_controller) or joint_trajectory")
        )
        self.declare_parameter(
            "allow_unvalidated",
            False,
            describe("run an artifact without a passing campaign verdict (development only)"),
        )
        self.declare_parameter(
            "trigger",
            "timer",
            describe(
                "timer: tick at the control rate; joint_states: tick once per /joint_states, "
                "when the other inputs of that instant are in (the driver sets the rate; "
                "the timer then only watches for silence)"
            ),
        )
        self.declare_parameter("autostart", True, describe("configure and activate at start-up"))
        self.declare_parameter(
            "executor",
            "events",
            describe(
                "events: rclpy's EventsExecutor (C++ event queue, a fraction of the "
                "per-callback cost); single: SingleThreadedExecutor"
            ),
        )
        self.policy = None
        self._timer = None
        self._subs: list = []
        self._pub_cmd = None
        self._pub_diag = None
        change_state = self._service_change_state.callback

        def guarded_change_state(request, response):
            # rclpy answers a request by transition id that the current state does not offer (e.g. activate while
            # unconfigured) with an exception out of the service callback, which ends the node's spin
            try:
                return change_state(request, response)
            except _rclpy.RCLError:
                t = request.transition
                self.get_logger().warn(
                    f"refused lifecycle transition {t.label or t.id!r}: not available from state "
                    f"{self._state_machine.current_state[1]!r}"
                )
                response.success = False
                return response

        self._service_change_state.callback = guarded_change_state

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        artifact = self.get_parameter("artifact").value
        output_type = self.get_parameter("output_type").value
        if output_type not in ("float64_array", "joint_trajectory"):
            self.get_logger().error(f"output_type {output_type!r}: use float64_array or joint_trajectory")
            return TransitionCallbackReturn.FAILURE
        self.trigger = self.get_parameter("trigger").value
        if self.trigger not in ("timer", "joint_states"):
            self.get_logger().error(f"trigger {self.trigger!r}: use timer or joint_states")
            return TransitionCallbackReturn.FAILURE
        try:
            policy = load_policy(artifact, self.get_parameter("backend").value)
            validation = require_validated(policy.manifest, self.get_parameter("allow_unvalidated").value, artifact)
        except (ArtifactError, BackendUnavailable, ValueError, OSError) as e:
            self.get_logger().error(f"cannot load artifact {artifact!r}: {e}")
            return TransitionCallbackReturn.FAILURE
        if validation.startswith("UNVALIDATED"):
            self.get_logger().warn(validation)
        else:
            self.get_logger().info(validation)
        m = policy.manifest
        self.policy = policy
        self.joint_names = list(m.joint_names)
        self.layout = ObservationLayout.from_manifest(m.observation["terms"], len(self.joint_names))
        self.scale = m.action_vector("scale").astype(np.float64)
        self.offset = m.action_vector("offset").astype(np.float64)
        self.safe_targets = self.offset + self.scale * policy.safety.safe_action
        rate = float(self.get_parameter("rate_hz").value)
        self.period = 1.0 / rate if rate > 0 else m.control_period
        self.stale_s = int(self.get_parameter("stale_periods").value) * self.period
        self.cmd_timeout_s = float(self.get_parameter("cmd_timeout_s").value)
        lim = m.command_limits
        overrides = [self.get_parameter(k).value for k in ("max_vx", "max_vy", "max_wz")]
        self.cmd_low = np.array([lim[k][0] for k in ("vx", "vy", "wz")], dtype=np.float64)
        self.cmd_high = np.array([lim[k][1] for k in ("vx", "vy", "wz")], dtype=np.float64)
        for i, o in enumerate(overrides):
            if o > 0:
                self.cmd_low[i], self.cmd_high[i] = max(self.cmd_low[i], -o), min(self.cmd_high[i], o)
        self.needed = sorted({SOURCES[t.name] for t in self.layout.terms if t.name in SOURCES})
        # |observation| bounds: PLAUSIBLE in observation units, inf elsewhere; NaN fails the test too
        self.obs_bound = np.concatenate(
            [np.abs(np.asarray(t.scale)) * PLAUSIBLE.get(t.name, np.inf) for t in self.layout.terms]
        )
        self.output_type = output_type
        self._cmd_msg = Float64MultiArray()  # one message, refilled each tick
        self._zero_command = np.zeros(3)
        # input age on the node's clock: under /clock (software in the loop) a slow wall-clock step is not a stale
        # input, the world waits for us; on the robot, monotonic time
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self._reset_inputs()

        self._pub_cmd = self.create_lifecycle_publisher(
            Float64MultiArray if output_type == "float64_array" else JointTrajectory,
            "/joint_commands" if output_type == "float64_array" else "/joint_trajectory",
            10,
        )
        self._pub_diag = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", 10)
        self._subs = [
            self.create_subscription(JointState, "/joint_states", self._on_joints, qos_profile_sensor_data),
            self.create_subscription(Imu, "/imu/data", self._on_imu, qos_profile_sensor_data),
            self.create_subscription(Odometry, "/odom", self._on_odom, qos_profile_sensor_data),
            self.create_subscription(Twist, "/cmd_vel", self._on_cmd_vel, 10),
        ]
        self.get_logger().info(
            f"configured {artifact}: {m.robot['name']}, {m.action_dim} joints, "
            f"{1 / self.period:.0f} Hz, {policy.backend} ({policy.reason})"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self.policy.reset()
        self._last_action = self.policy.safety.safe_action.astype(np.float64)
        self._last_tick = None
        self._last_tick_clock_ns = None
        self._due_ns = None
        self._timer = self.create_timer(self.period, self._tick if self.trigger == "timer" else self._watchdog)
        self._diag_timer = self.create_timer(1.0, self._publish_diagnostics)
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._publish_targets(self.safe_targets)  # leave the robot holding its safe pose
        self.destroy_timer(self._timer)
        self.destroy_timer(self._diag_timer)
        self._timer = None
        self._due_ns = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        self.destroy_lifecycle_publisher(self._pub_cmd)
        self.destroy_lifecycle_publisher(self._pub_diag)
        self.policy = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        if self._timer is not None:
            self._publish_targets(self.safe_targets)
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ inputs
    def _reset_inputs(self) -> None:
        self.values: dict[str, np.ndarray] = {}
        self.stamp: dict[str, float] = {}  # receive time per input (_input_time)
        self.header_ns: dict[str, int] = {}  # header stamp per input (the instant it describes)
        self._due_ns: int | None = None  # trigger=joint_states: the stamp of the /joint_states awaiting its tick
        self._ticked_ns = 0  # trigger=joint_states: the stamp of the last instant ticked on
        self.command = np.zeros(3)
        self.cmd_stamp = -np.inf
        self.latest_input = 0.0
        self.level, self.message = WARN, "waiting for inputs"
        self.fault_ticks = 0
        self.ticks = 0
        self.deadline_misses = 0
        self.latencies: deque[float] = deque(maxlen=1000)  # the diagnostics' window
        self._order = None
        self._names_seen: tuple[str, ...] | None = None

    def _input_time(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9 if self._sim_time else time.monotonic()

    def _received(self, source: str, header) -> None:
        self.stamp[source] = self._input_time()
        self.latest_input = time.monotonic()
        self.header_ns[source] = header.stamp.sec * 1_000_000_000 + header.stamp.nanosec
        if self._due_ns is not None and all(self.header_ns.get(s, -1) >= self._due_ns for s in self.needed):
            # every input now describes the instant of that /joint_states (or later): tick on one consistent state.
            # Ticking on /joint_states alone would often read the previous /imu/data and /odom, because the
            # executor serves subscriptions in its own order: a one-period delay the policy never saw in training.
            self._ticked_ns, self._due_ns = self._due_ns, None
            self._tick()

    def _on_joints(self, msg: JointState) -> None:
        names = tuple(msg.name)
        if names != self._names_seen:  # drivers keep one order; look it up only when it changes
            missing = [j for j in self.joint_names if j not in names]
            self._order = None if missing else np.array([names.index(j) for j in self.joint_names])
            self._names_seen = names
        n = len(self.joint_names)
        pos, vel = np.asarray(msg.position, dtype=np.float64), np.asarray(msg.velocity, dtype=np.float64)
        if self._order is None or len(pos) != len(names) or len(vel) != len(names):
            pos = vel = np.full(n, np.nan)  # missing joints or fields: a fault the watchdog reports
        else:
            pos, vel = pos[self._order] - self.offset, vel[self._order]
        self.values["joint_pos"], self.values["joint_vel"] = pos, vel
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        # one tick per instant: a state sent again (a lockstep bridge does when no command answered it) must not
        # get a second command, which a lockstep bridge would take as the answer to its next state
        if self.trigger == "joint_states" and self._timer is not None and (stamp == 0 or stamp != self._ticked_ns):
            self._due_ns = stamp
        self._received("joint_states", msg.header)

    def _on_imu(self, msg: Imu) -> None:
        q, w = msg.orientation, msg.angular_velocity
        self.values["projected_gravity"] = np.array(projected_gravity_one(q.w, q.x, q.y, q.z))
        self.values["base_ang_vel"] = np.array([w.x, w.y, w.z])
        self._received("imu", msg.header)

    def _on_odom(self, msg: Odometry) -> None:
        v = msg.twist.twist.linear  # in child_frame_id, the base frame
        self.values["base_lin_vel"] = np.array([v.x, v.y, v.z])
        self._received("odom", msg.header)

    def _on_cmd_vel(self, msg: Twist) -> None:
        cmd = np.array([msg.linear.x, msg.linear.y, msg.angular.z])
        if np.all(np.isfinite(cmd)):
            self.command = np.clip(cmd, self.cmd_low, self.cmd_high)
            self.cmd_stamp = self._input_time()

    # ------------------------------------------------------------------ control
    def _stale(self, now: float) -> str | None:
        stale = [s for s in self.needed if now - self.stamp.get(s, -np.inf) > self.stale_s]
        return f"stale input: {', '.join(stale)} (older than {self.stale_s * 1000:.0f} ms)" if stale else None

    def _bad_value(self) -> str:
        """Which input made the observation fail its bounds (the slow path, run only on a fault)."""
        for t in self.layout.terms:
            v = self.values.get(t.name)
            if v is None:
                continue
            if not np.all(np.isfinite(v)):
                return f"non-finite {t.name}"
            if t.name in PLAUSIBLE and np.max(np.abs(v)) > PLAUSIBLE[t.name]:
                return f"{t.name} out of range (|value| > {PLAUSIBLE[t.name]:g})"
        return "observation out of range"

    def _watchdog(self) -> None:
        """Event-triggered mode: when /joint_states falls silent, ticks come from here and hold the safe pose.
        Silence is measured on the node's clock: under /clock (lockstep) a slow wall-clock step is not silence, and
        an extra tick there would make the bridge take an extra step on an old command."""
        now = self.get_clock().now().nanoseconds
        if self._last_tick_clock_ns is None or now - self._last_tick_clock_ns > self.stale_s * 1e9:
            self._due_ns = None
            self._tick()

    def _tick(self) -> None:
        start = time.monotonic()
        if self._last_tick is not None and start - self._last_tick > 1.5 * self.period:
            self.deadline_misses += 1
        self._last_tick = start
        if self.trigger == "joint_states":  # the watchdog's reference: the instant ticked on, when the clock
            # message announcing it has not been served yet
            self._last_tick_clock_ns = max(self.get_clock().now().nanoseconds, self._ticked_ns)
        self.ticks += 1
        now = self._input_time()
        level, message = OK, "running"
        stale = self._stale(now)
        if stale:
            level, message = WARN, stale
        else:
            command = self.command if now - self.cmd_stamp <= self.cmd_timeout_s else self._zero_command
            values = {**self.values, "velocity_command": command, "last_action": self._last_action}
            obs = self.layout.assemble(values)
            # one vectorised test on the hot path; which input failed is looked up only on a fault
            if not np.all(np.abs(obs) <= self.obs_bound):
                level, message = ERROR, self._bad_value()
        if level != OK:
            targets = self.safe_targets
            self.fault_ticks += 1
            self.policy.reset()  # on recovery the safety filter ramps from the safe pose
            self._last_action = self.policy.safety.safe_action.astype(np.float64)
        else:
            action = self.policy.act(obs).astype(np.float64)
            self._last_action = action
            targets = self.offset + self.scale * action
        self._publish_targets(targets)
        self.latencies.append(time.monotonic() - (self.latest_input if level == OK else start))
        if level != self.level:
            self.level, self.message = level, message
            # one call site per severity: rclpy refuses to change the severity of a call site
            if level == OK:
                self.get_logger().info(f"{message}; policy in control")
            elif level == WARN:
                self.get_logger().warn(f"{message}; holding the safe pose")
            else:
                self.get_logger().error(f"{message}; holding the safe pose")
            self._publish_diagnostics()

    def _publish_targets(self, targets: np.ndarray) -> None:
        if self.output_type == "float64_array":
            data = array.array("d")  # taken as it is by the message (a list would be checked value by value)
            data.frombytes(np.ascontiguousarray(targets, dtype=np.float64).tobytes())
            self._cmd_msg.data = data
            self._pub_cmd.publish(self._cmd_msg)
        else:
            traj = JointTrajectory(joint_names=self.joint_names)
            traj.points = [JointTrajectoryPoint(positions=[float(t) for t in targets])]
            self._pub_cmd.publish(traj)

    def _publish_diagnostics(self) -> None:
        lat = np.array(self.latencies) * 1000 if self.latencies else np.zeros(1)
        status = DiagnosticStatus(
            level=self.level,
            name="policy_node",
            message=self.message,
            hardware_id=self.policy.manifest.robot["name"] if self.policy else "",
        )
        pairs = {
            "backend": self.policy.backend if self.policy else "none",
            "latency_p50_ms": f"{np.percentile(lat, 50):.3f}",
            "latency_p99_ms": f"{np.percentile(lat, 99):.3f}",
            "ticks": str(self.ticks),
            "deadline_misses": str(self.deadline_misses),
            "fault_ticks": str(self.fault_ticks),
            "safety_filter_faults": str(self.policy.safety.fault_count if self.policy else 0),
        }
        status.values = [KeyValue(key=k, value=v) for k, v in pairs.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._pub_diag.publish(msg)


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = PolicyNode()
    if node.get_parameter("autostart").value and node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
        node.trigger_activate()
    kind = node.get_parameter("executor").value
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        executor = EventsExecutor()
    else:
        if kind != "single":
            node.get_logger().error(f"executor {kind!r}: use events or single; running single")
        executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    try:
        # spin_once with a timeout: the EventsExecutor's spin() (rclpy 7.1) busy-loops without running timers
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        if rclpy.ok():
            raise  # otherwise a message take that raced the SIGINT shutdown: nothing is lost
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
