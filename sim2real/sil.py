"""`sim2real sil`: software in the loop. The robot's node set runs as separate processes over real DDS:
sim_bridge_node plays the robot (optionally a field twin with hidden parameter offsets), policy_node runs the
artifact, field_recorder logs MCAP, and an operator in this process drives it: either a /cmd_vel script, or (the
deployment stage of `sim2real loop`) an /instruction script that instruction_node turns into /cmd_vel. The
bridge owns /clock and steps as soon as each command arrives, so a run goes faster than real time. Prints
tracking KPIs against the commands the policy was given.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from edge.resources import config_path
from sim2real.errors import UserError

HELP = "Run policy_node against a twin over ROS 2 (software in the loop) and report tracking KPIs."
EXAMPLES = """examples:
  sim2real sil --artifact policy/ --duration 20
  sim2real sil --artifact policy/ --field-twin field.yaml --record runs/sil/logs
  sim2real sil --artifact policy/ --commands my_script.yaml --real-time
  sim2real sil --artifact policy/ --instructions config/sil/instructions.yaml --instruction-model runs/rlhf/model

field.yaml holds hidden twin parameters, e.g. {friction: 0.5, payload_kg: 3.0, latency_s: 0.02}.
An instruction script is a YAML list of {t_s, text}: each text goes out on /instruction at simulated time t_s.
"""
CONFIG = config_path("sil")
DEFAULT_COMMANDS = CONFIG / "default_commands.yaml"
DEFAULT_INSTRUCTIONS = CONFIG / "instructions.yaml"
SETTLE_S = 1.0  # after a command change, errors are not counted for this long (as in campaigns: sim.kpis)
CMD_TIMEOUT_S = 0.5  # policy_node's default cmd_timeout_s: an older /cmd_vel means "stand still"
MODEL_LOAD_S = 300.0  # wall-clock wait for instruction_node to load its model
RESEND_S = 0.25  # a lockstep bridge sends an unanswered state again after this wall time


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.runtime import BACKENDS
    from training.rlhf.config import INSTRUCTION_BACKENDS

    p.add_argument("--artifact", required=True, help="policy artifact directory")
    p.add_argument("--duration", type=float, default=20.0, help="simulated seconds (default 20)")
    p.add_argument("--field-twin", default="", help="YAML of hidden twin parameters (default: nominal twin)")
    p.add_argument("--commands", default=str(DEFAULT_COMMANDS), help="YAML list of {vx, vy, wz, duration_s}")
    p.add_argument(
        "--instructions",
        default="",
        help="YAML list of {t_s, text} for instruction_node (replaces --commands; needs --instruction-model)",
    )
    p.add_argument("--instruction-model", default="", help="instruction model directory (sim2real rlhf output)")
    p.add_argument(
        "--instruction-backend",
        choices=INSTRUCTION_BACKENDS,
        default=INSTRUCTION_BACKENDS[0],
        help="instruction_node backend",
    )
    p.add_argument("--record", default="", help="record MCAP field logs into this directory")
    p.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0], help="policy backend")
    p.add_argument("--real-time", action="store_true", help="wall-clock pace instead of lockstep")
    p.add_argument("--allow-unvalidated", action="store_true", help="run an artifact no campaign has passed")
    p.add_argument("--json", default="", help="write the KPI summary to this file")


@dataclass
class Segment:
    vx: float
    vy: float
    wz: float
    duration_s: float


@dataclass
class Instruction:
    t_s: float
    text: str


def load_commands(path: str | Path) -> list[Segment]:
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: expected a non-empty list of {{vx, vy, wz, duration_s}}")
    try:
        segments = [
            Segment(float(s.get("vx", 0)), float(s.get("vy", 0)), float(s.get("wz", 0)), float(s["duration_s"]))
            for s in raw
        ]
    except (KeyError, TypeError, AttributeError, ValueError):
        raise UserError(f"{path}: each segment needs numeric vx, vy, wz and duration_s") from None
    if any(s.duration_s <= 0 for s in segments):
        raise UserError(f"{path}: segment durations must be positive")
    return segments


def load_instructions(path: str | Path) -> list[Instruction]:
    """An instruction script: {t_s, text} entries, sent in time order."""
    if not Path(path).is_file():
        raise UserError(f"instruction script {path} does not exist")
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{path}: expected a non-empty list of {{t_s, text}}")
    try:
        script = [Instruction(float(e["t_s"]), str(e["text"])) for e in raw]
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{path}: each entry needs a numeric t_s and a text") from None
    if any(not math.isfinite(i.t_s) or i.t_s < 0 for i in script):
        raise UserError(f"{path}: t_s must be finite and >= 0")
    return sorted(script, key=lambda i: i.t_s)


def command_at(segments: list[Segment], t: float) -> np.ndarray:
    """The command at time t (the script repeats)."""
    t = t % sum(s.duration_s for s in segments)
    for s in segments:
        if t < s.duration_s:
            return np.array([s.vx, s.vy, s.wz])
        t -= s.duration_s
    return np.array([segments[-1].vx, segments[-1].vy, segments[-1].wz])


def tracking_kpis(samples: np.ndarray, dt: float, min_base_height: float) -> dict:
    """samples: rows (t, cmd_vx, cmd_vy, cmd_wz, vx, vy, wz, z, ...), one per control step; scored as campaigns
    are."""
    from sim.kpis import count_events, settled, tracking_errors

    commands, lin, ang = samples[:, 1:4], np.zeros((len(samples), 3)), np.zeros((len(samples), 3))
    lin[:, :2], ang[:, 2] = samples[:, 4:6], samples[:, 6]
    err_lin, err_ang = tracking_errors(commands, lin, ang, settled(commands, dt, SETTLE_S))
    return {
        "samples": int(len(samples)),
        "tracking_error_lin": float(err_lin),
        "tracking_error_ang": float(err_ang),
        "falls": int(count_events(samples[:, 7] < min_base_height)),
    }


def displacement(samples: np.ndarray) -> dict:
    """Where the robot went, in its start frame: rows (..., x, y, yaw) in the last three columns."""
    x, y, yaw = samples[:, -3], samples[:, -2], np.unwrap(samples[:, -1])
    c, s = math.cos(yaw[0]), math.sin(yaw[0])
    dx, dy = x[-1] - x[0], y[-1] - y[0]
    return {"forward_m": float(c * dx + s * dy), "left_m": float(-s * dx + c * dy), "yaw_rad": float(yaw[-1] - yaw[0])}


def _start(executable: str, params: dict, log_dir: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", f"ros_nodes.{executable}", "--ros-args"]
    for k, v in params.items():
        args += ["-p", f"{k}:={v}"]
    # a log file, not a pipe: a pipe nobody reads fills up and stalls the node
    with open(log_dir / f"{executable}.log", "w") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def _last_line(log_dir: Path, name: str, containing: str = "") -> str:
    lines = [line for line in (log_dir / f"{name}.log").read_text().strip().splitlines() if containing in line]
    return lines[-1] if lines else "no output"


def _check_alive(procs: list[subprocess.Popen], log_dir: Path) -> None:
    dead = [p for p in procs if p.poll() is not None]
    if dead:
        name = dead[0].args[2].split(".")[-1]
        raise UserError(f"{name} exited early: {_last_line(log_dir, name)} (logs: {log_dir})")


class Operator:
    """The run's operator node: plays the /cmd_vel or /instruction script on the robot's clock (the /odom stamps:
    simulated time in lockstep) and records, per /odom, the command in force and the robot's motion."""

    def __init__(
        self, node, segments: list[Segment] | None, instructions: list[Instruction] | None, dt: float, lockstep: bool
    ):
        from geometry_msgs.msg import Twist
        from nav_msgs.msg import Odometry
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from std_msgs.msg import Float64MultiArray, String

        self.segments, self.script, self.dt, self.lockstep = segments, list(instructions or []), dt, lockstep
        self.Twist, self.String = Twist, String
        self.samples: list[list[float]] = []
        self.sent: list[dict] = []  # instructions published: {t_s, text}
        self.plans: list[dict] = []  # instruction_node's ~/plan messages, with the time they came
        self.t0: float | None = None  # the robot's clock at script time zero
        self.seen = False  # a state came in
        self.commanding = False  # a /joint_commands came out of policy_node
        self.started = False  # set once policy_node runs: instructions play from then on
        self._cmd, self._cmd_t = np.zeros(3), -math.inf
        self.pub_cmd = node.create_publisher(Twist, "/cmd_vel", 10) if segments else None
        self.pub_instruction = node.create_publisher(String, "/instruction", 10)
        node.create_subscription(Odometry, "/odom", self._on_odom, qos_profile_sensor_data)
        if not lockstep:
            node.create_subscription(
                Float64MultiArray, "/joint_commands", lambda _: setattr(self, "commanding", True), 10
            )
        if instructions:  # the reference is what instruction_node commands
            node.create_subscription(Twist, "/cmd_vel", self._on_cmd_vel, 10)
            latched = QoSProfile(
                depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            )
            node.create_subscription(String, "/instruction_node/plan", self._on_plan, latched)

    @property
    def t(self) -> float:
        return self.samples[-1][0] if self.samples else 0.0

    def _on_cmd_vel(self, msg) -> None:
        self._cmd, self._cmd_t = np.array([msg.linear.x, msg.linear.y, msg.angular.z]), self.t

    def _on_plan(self, msg) -> None:
        self.plans.append({"t_s": self.t, **json.loads(msg.data)})

    def _on_odom(self, msg) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.seen = True
        if self.t0 is None and (self.lockstep or self.commanding):
            # lockstep: time stands still until the policy runs, so zero is the start state; real time: the world
            # runs on while policy_node starts up, and the script starts once it commands the robot
            self.t0 = stamp
        if self.t0 is None:
            return
        t = stamp - self.t0
        if self.samples and t <= self.samples[-1][0]:
            return  # the same state again (a lockstep bridge resends a state nobody answered)
        if self.segments:
            cmd = command_at(self.segments, t)
            # one control period ahead, as a script can be: the command reaches policy_node before its tick at
            # t + dt, so the policy acts on command(t) at t as in the twin (campaigns), not one period late
            twist = self.Twist()
            twist.linear.x, twist.linear.y, twist.angular.z = (float(v) for v in command_at(self.segments, t + self.dt))
            self.pub_cmd.publish(twist)
        else:
            cmd = self._cmd if t - self._cmd_t <= CMD_TIMEOUT_S else np.zeros(3)
            while self.started and self.script and self.script[0].t_s <= t:
                entry = self.script.pop(0)
                self.pub_instruction.publish(self.String(data=entry.text))
                self.sent.append({"t_s": round(t, 3), "text": entry.text})
        v, w, p, q = msg.twist.twist.linear, msg.twist.twist.angular, msg.pose.pose.position, msg.pose.pose.orientation
        yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))
        self.samples.append([t, *cmd, v.x, v.y, w.z, p.z, p.x, p.y, yaw])

    def executed(self) -> list[dict]:
        """Each instruction sent, with the plan instruction_node executed for it (None: preempted before its plan
        was ready, or still generating at the end)."""
        plans = list(self.plans)
        out = []
        for entry in self.sent:
            match = next((p for p in plans if p.get("instruction") == entry["text"][:200]), None)
            if match is not None:
                plans.remove(match)
            out.append(
                {
                    **entry,
                    "plan": match and match["plan"],
                    "valid": match and match["valid"],
                    "warnings": match["warnings"] if match else [],
                    "planned_at_s": round(match["t_s"], 3) if match else None,
                }
            )
        return out


class LifecycleClient:
    """Takes a managed node through its transitions, as a lifecycle manager does. A reply lost on the DDS response
    path (it can still be matching when the request path is) is judged by the state the node reached."""

    GOAL = {1: "inactive", 3: "active"}  # lifecycle_msgs/Transition: CONFIGURE, ACTIVATE

    def __init__(self, node, name: str):
        from lifecycle_msgs.srv import ChangeState, GetState

        self.name, self.ChangeState, self.GetState = name, ChangeState, GetState
        self.change = node.create_client(ChangeState, f"/{name}/change_state")
        self.get = node.create_client(GetState, f"/{name}/get_state")

    def transition(self, transition_id: int, wait_for) -> bool:
        """True once the node is in the transition's goal state."""
        from lifecycle_msgs.msg import Transition

        wait_for(
            f"{self.name}'s lifecycle services",
            lambda: self.change.service_is_ready() and self.get.service_is_ready(),
            60,
        )
        reply = self._call(self.change, self.ChangeState.Request(transition=Transition(id=transition_id)), wait_for)
        if reply is None:  # lost: ask where the node is
            state = None
            for _ in range(5):
                state = self._call(self.get, self.GetState.Request(), wait_for)
                if state is not None:
                    break
            return state is not None and state.current_state.label == self.GOAL[transition_id]
        return reply.success

    @staticmethod
    def _call(client, request, wait_for, seconds: float = 5.0):
        future = client.call_async(request)
        try:
            wait_for("a lifecycle reply", future.done, seconds)
        except UserError:
            return None
        return future.result()


def run_sil(
    artifact: str,
    duration: float,
    field_twin: str = "",
    commands: str | Path = DEFAULT_COMMANDS,
    record: str = "",
    backend: str = "auto",
    real_time: bool = False,
    allow_unvalidated: bool = False,
    instructions: str | Path | None = None,
    instruction_model: str | Path | None = None,
    instruction_backend: str = "transformers",
    progress=None,
) -> dict:
    """Run the node set for `duration` simulated seconds; return the KPI summary. With `instructions` (a script
    of {t_s, text}) instruction_node runs `instruction_model` and its /cmd_vel is both the policy's command and
    the reference the KPIs score against; without, the /cmd_vel script `commands` is."""
    import rclpy
    from lifecycle_msgs.msg import Transition
    from rclpy.parameter import Parameter

    from edge.manifest import load_manifest
    from edge.validation import require_validated
    from sim.robot import load_robot

    manifest = load_manifest(artifact)  # fails early, with the reason, on a bad artifact
    require_validated(manifest, allow_unvalidated, artifact)
    robot = load_robot(manifest.robot["name"])
    if instructions:
        if not instruction_model:
            raise UserError("an instruction script needs an instruction model (--instruction-model)")
        script, segments = load_instructions(instructions), None
    else:
        script, segments = None, load_commands(commands)
    lockstep, sim_time = not real_time, str(not real_time).lower()
    log_dir = Path(tempfile.mkdtemp(prefix="sil-logs-"))
    procs = [
        _start(
            "sim_bridge_node",
            {
                "robot": robot.name,
                "field_twin": field_twin or "''",
                "lockstep": sim_time,
                "lockstep_timeout_s": RESEND_S,
            },
            log_dir,
        ),
        # configured and activated from here, as a lifecycle manager would, once everything is connected
        _start(
            "policy_node",
            {
                "artifact": artifact,
                "backend": backend,
                "use_sim_time": sim_time,
                "trigger": "joint_states" if lockstep else "timer",
                "autostart": "false",
                "allow_unvalidated": str(allow_unvalidated).lower(),
            },
            log_dir,
        ),
    ]
    if record:
        procs.append(_start("field_recorder", {"output_dir": record, "use_sim_time": sim_time}, log_dir))
    if script:
        procs.append(
            _start(
                "instruction_node",
                {
                    "model": instruction_model,
                    "backend": instruction_backend,
                    "artifact": artifact,
                    "use_sim_time": sim_time,
                },
                log_dir,
            )
        )

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(
        "sil_operator", context=context, parameter_overrides=[Parameter("use_sim_time", value=lockstep)]
    )
    operator = Operator(node, segments, script, robot.control_dt, lockstep)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def subscribed(node_name: str, topic: str) -> bool:
        return any(i.node_name == node_name for i in node.get_subscriptions_info_by_topic(topic))

    def all_matched(publisher, topic: str) -> bool:  # every subscriber in the graph is connected to `publisher`
        return publisher.get_subscription_count() >= len(node.get_subscriptions_info_by_topic(topic))

    def wait_for(what: str, ready, seconds: float) -> None:
        wall_limit = time.monotonic() + seconds
        while not ready():
            executor.spin_once(timeout_sec=0.1)
            _check_alive(procs, log_dir)
            if time.monotonic() > wall_limit:
                raise UserError(f"{what} was not ready in {seconds:g} s (logs: {log_dir})")

    try:
        # the robot moves once policy_node is active: before that, this operator must have the start state (time
        # zero of its script), the recorder must be listening, instruction_node (it subscribes once its model is
        # loaded) ready to hear the first instruction, and policy_node connected to its command source; else the
        # first seconds of a lockstep run, which takes no time at all, go unrecorded or uncommanded
        wait_for("sim_bridge_node", lambda: operator.seen, 60)
        if record:
            wait_for("field_recorder", lambda: subscribed("field_recorder", "/odom"), 60)
        if script:
            wait_for("instruction_node", lambda: subscribed("instruction_node", "/instruction"), MODEL_LOAD_S)
        lifecycle = LifecycleClient(node, "policy_node")
        if not lifecycle.transition(Transition.TRANSITION_CONFIGURE, wait_for):
            raise UserError(f"policy_node: {_last_line(log_dir, 'policy_node', 'ERROR')} (logs: {log_dir})")
        wait_for(
            "policy_node's topics",
            lambda: (
                subscribed("policy_node", "/cmd_vel")
                and any(i.node_name == "policy_node" for i in node.get_publishers_info_by_topic("/joint_commands"))
            ),
            60,
        )
        if segments:
            wait_for("policy_node's /cmd_vel", lambda: all_matched(operator.pub_cmd, "/cmd_vel"), 60)
        if not lifecycle.transition(Transition.TRANSITION_ACTIVATE, wait_for):
            raise UserError(f"policy_node did not activate (logs: {log_dir})")
        operator.started = True
        wall_limit = time.monotonic() + 60 + (duration * 1.5 if real_time else duration * 5)
        while operator.t < duration and time.monotonic() < wall_limit:
            executor.spin_once(timeout_sec=0.05)
            if progress is not None and operator.samples:
                progress(min(operator.t, duration))
            _check_alive(procs, log_dir)
        if operator.t < duration:
            raise UserError(f"software-in-the-loop run did not reach {duration} s of simulated time in time")
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        _stop(procs)
    samples = np.array(operator.samples)
    summary = {
        "robot": robot.name,
        "artifact": str(artifact),
        "field_twin": field_twin,
        "duration_s": duration,
        "lockstep": lockstep,
        **tracking_kpis(samples, robot.control_dt, robot.termination.min_base_height),
        "displacement": displacement(samples),
    }
    if script:
        summary["instructions"] = operator.executed()
    return summary


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    with Progress(console=Console(stderr=True)) as bar:
        task = bar.add_task("software in the loop (simulated s)", total=args.duration)
        summary = run_sil(
            args.artifact,
            args.duration,
            args.field_twin,
            args.commands,
            args.record,
            args.backend,
            args.real_time,
            args.allow_unvalidated,
            args.instructions or None,
            args.instruction_model or None,
            args.instruction_backend,
            progress=lambda t: bar.update(task, completed=t),
        )
    table = Table(
        title=f"{summary['robot']}, {args.duration:g} s simulated",
        caption=f"means after {SETTLE_S:g} s settling per command",
    )
    table.add_column("KPI")
    table.add_column("value", justify="right")
    for key in ("tracking_error_lin", "tracking_error_ang", "falls", "samples"):
        table.add_row(key, f"{summary[key]:.3f}" if isinstance(summary[key], float) else str(summary[key]))
    d = summary["displacement"]
    table.add_row(
        "moved (start frame)",
        f"{d['forward_m']:+.2f} m fwd, {d['left_m']:+.2f} m left, {math.degrees(d['yaw_rad']):+.0f} deg",
    )
    Console().print(table)
    for entry in summary.get("instructions", []):
        plan = (
            "preempted or still generating"
            if entry["plan"] is None
            else ", ".join(f"({s['vx']:g}, {s['wz']:g}) for {s['duration_s']:g} s" for s in entry["plan"])
        )
        Console().print(f"t = {entry['t_s']:5.1f} s  {entry['text']!r}: {plan}")
    if args.json:
        from edge.fileio import atomic_write_bytes

        atomic_write_bytes(args.json, json.dumps(summary, indent=2).encode())
    return 0
