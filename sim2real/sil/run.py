"""`run_sil`: software in the loop. The robot's node set runs as separate processes over real DDS: sim_bridge_node
plays the robot (optionally a field twin with hidden parameter offsets), policy_node runs the artifact,
field_recorder logs MCAP, and an operator in this process drives it: either a /cmd_vel script, or (the deployment
stage of `sim2real loop`) an /instruction script that instruction_node turns into /cmd_vel. The bridge owns /clock
and steps as soon as each command arrives, so a run goes faster than real time. Returns tracking KPIs against the
commands the policy was given.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edge.config import setting
from edge.providers import BACKENDS as ONNX_BACKENDS
from edge.runtime import BACKENDS as POLICY_BACKENDS
from edge.signing import TrustPolicy
from sim2real.errors import UserError
from sim2real.sil.processes import ROBOT_NODES, NodeProcesses
from sim2real.sil.scoring import displacement, tracking_kpis
from sim2real.sil.scripts import DEFAULT_COMMANDS, load_commands, load_instructions

if TYPE_CHECKING:  # rclpy only once a run starts, so that `sim2real --help` and the scoring import without ROS
    from edge.manifest import Manifest
    from sim.robot import RobotSpec
    from sim2real.sil.operator import Operator

MODEL_LOAD_S = 300.0  # wall-clock wait for instruction_node to load its model
RESEND_S = 0.25  # a lockstep bridge sends an unanswered state again after this wall time
CONNECT_S = 60.0  # wall-clock wait for a node to come up or connect
SENSOR_TOPICS = ("/joint_states", "/imu/data", "/odom")  # what sim_bridge_node publishes for every robot


@dataclass(frozen=True)
class SilRequest:
    """One software-in-the-loop run: what the nodes run, on which twin, driven by which script."""

    artifact: str = setting(help="the policy artifact directory policy_node runs")
    duration: float = setting(20.0, "simulated seconds to run", gt=0)
    field_twin: str = setting(
        "",
        "a field robot YAML for sim_bridge_node: hidden twin parameters and effects the twin cannot express; '' the "
        "nominal twin",
    )
    commands: str | Path = setting(
        DEFAULT_COMMANDS,
        "the operator's /cmd_vel script, a YAML list of {vx, vy, wz, duration_s} (without instructions)",
    )
    record: str = setting("", "field_recorder's MCAP directory; '' records nothing")
    backend: str = setting("auto", "policy_node's inference backend", choices=POLICY_BACKENDS)
    gyro_bias: tuple[float, float, float] = setting(
        (0.0, 0.0, 0.0), "policy_node's IMU calibration: the gyro bias it takes off /imu/data (x y z, rad/s)", length=3
    )
    real_time: bool = setting(False, "run on the wall clock instead of lockstep on /clock")
    instructions: str | Path | None = setting(
        None,
        "an instruction script, a YAML list of {t_s, text}: instruction_node's /cmd_vel drives and is scored "
        "(replaces commands; needs instruction_model)",
    )
    instruction_model: str | Path | None = setting(
        None, "the exported model instruction_node runs (the rlhf pipeline's onnx/)"
    )
    instruction_backend: str = setting("auto", "instruction_node's ONNX Runtime providers", choices=ONNX_BACKENDS)
    robot_python: str | None = setting(
        None,
        "run policy_node, instruction_node and field_recorder on this interpreter: the robot's own install (a venv "
        "with edge[robot,instruct]); the twin stays on this one",
    )
    trust: TrustPolicy = setting(TrustPolicy(), "what the artifact (and the instruction model) must pass to run")

    def resolved(self) -> SilRequest:
        """The request with absolute paths: the nodes start in their log directory."""
        return dataclasses.replace(
            self,
            artifact=str(Path(self.artifact).resolve()),
            record=str(Path(self.record).resolve()) if self.record else "",
            field_twin=str(Path(self.field_twin).resolve()) if self.field_twin else "",
            instruction_model=str(Path(self.instruction_model).resolve()) if self.instruction_model else None,
            trust=self.trust.resolved(),
        )


def run_sil(request: SilRequest, progress: Callable[[float], None] | None = None) -> dict:
    """Run the node set for `request.duration` simulated seconds; return the KPI summary. With instructions
    instruction_node runs the instruction model and its /cmd_vel is both the policy's command and the reference the
    KPIs score against; without, the /cmd_vel script `commands` is. The artifact (and the instruction model) must
    be signed by one of the trusted keys unless the trust policy allows unsigned ones (development only, with a
    WARN). `progress` gets the simulated seconds so far."""
    import rclpy
    from rclpy.parameter import Parameter

    from sim.robot import load_robot
    from sim2real.sil.operator import Operator

    request = request.resolved()
    manifest = check_artifacts(request)
    robot = load_robot(manifest.robot["name"])
    segments, script = _scripts(request)
    nodes = start_nodes(request, robot.name)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(
        "sil_operator", context=context, parameter_overrides=[Parameter("use_sim_time", value=not request.real_time)]
    )
    session = Session(node, nodes, Operator(node, segments, script, robot.control_dt, not request.real_time))
    try:
        session.connect(request)
        session.activate_policy()
        session.run(request, progress)
    finally:
        session.close()
        rclpy.shutdown(context=context)
        killed = nodes.stop()
        recovered = recover_recording(request.record, killed)
    summary = summarise(request, robot, session.operator, nodes)
    if recovered:
        summary["recovered_segments"] = recovered
    return summary


def recover_recording(record: str, killed: list[str]) -> list[dict]:
    """What a recorder that was killed (or crashed) before finalising left under `.partial/`, rewritten into
    finalised segments as its next start would: a run's log is never left where a reader skips it. A WARN each."""
    from ros_nodes.recovery import recover_partial_segments

    if not record:
        return []
    recovered = recover_partial_segments(record)
    why = "was killed" if "field_recorder" in killed else "exited"
    for r in recovered:
        warnings.warn(
            f"WARN field_recorder {why} before finalising its segment: recovered {r.messages} messages into "
            f"{r.segment}" + (f" ({r.damage})" if r.damage else ""),
            stacklevel=3,
        )
    return [{"segment": str(r.segment), "messages": r.messages, "damage": r.damage} for r in recovered]


def check_artifacts(request: SilRequest) -> Manifest:
    """The artifact's manifest, once its signature (and the instruction model's) and its validation passed: a
    refusal comes before any node starts, with the reason. A waived check is a warning."""
    from edge.manifest import load_manifest
    from edge.validation import require_validated

    for directory in (request.artifact, *([request.instruction_model] if request.instructions else [])):
        if not directory:
            raise UserError("an instruction script needs an instruction model (--instruction-model)")
        signature = request.trust.check_signed(directory)
        if not signature.passed:
            warnings.warn(signature.message, stacklevel=3)
    manifest = load_manifest(request.artifact)
    require_validated(manifest, request.trust.allow_unvalidated, request.artifact)
    return manifest


def _scripts(request: SilRequest) -> tuple[list | None, list | None]:
    """(the /cmd_vel segments, the instruction script): exactly one of them drives the run."""
    if request.instructions:
        return None, load_instructions(request.instructions)
    return load_commands(request.commands), None


def start_nodes(request: SilRequest, robot: str) -> NodeProcesses:
    """The twin, policy_node (unconfigured: the Session drives its lifecycle), and the recorder and instruction_node
    when the request has them."""
    lockstep = not request.real_time
    sim_time = str(lockstep).lower()
    signature = request.trust.signature_parameters()
    nodes = NodeProcesses(request.robot_python)
    nodes.start(
        "sim_bridge_node",
        {
            "robot": robot,
            "field_twin": request.field_twin or "''",
            "lockstep": sim_time,
            "lockstep_timeout_s": RESEND_S,
        },
    )
    nodes.start(
        "policy_node",
        {
            "artifact": request.artifact,
            "backend": request.backend,
            "use_sim_time": sim_time,
            "trigger": "joint_states" if lockstep else "timer",
            "autostart": "false",
            "allow_unvalidated": str(request.trust.allow_unvalidated).lower(),
            "gyro_bias": f"[{', '.join(repr(float(b)) for b in request.gyro_bias)}]",
            **signature,
        },
    )
    if request.record:
        nodes.start("field_recorder", {"output_dir": request.record, "use_sim_time": sim_time})
    if request.instructions:
        nodes.start(
            "instruction_node",
            {
                "model": request.instruction_model,
                "backend": request.instruction_backend,
                "artifact": request.artifact,
                "use_sim_time": sim_time,
                **signature,
            },
        )
    return nodes


class Session:
    """The operator's side of a run: waits for the graph, drives policy_node's lifecycle as a lifecycle manager
    would, and spins until the script's simulated time is over."""

    def __init__(self, node, nodes: NodeProcesses, operator: Operator):
        from rclpy.executors import SingleThreadedExecutor

        self.node, self.nodes, self.operator = node, nodes, operator
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)

    def subscribed(self, node_name: str, topic: str) -> bool:
        return any(i.node_name == node_name for i in self.node.get_subscriptions_info_by_topic(topic))

    def publishes(self, node_name: str, topic: str) -> bool:
        return any(i.node_name == node_name for i in self.node.get_publishers_info_by_topic(topic))

    def all_matched(self, publisher, topic: str) -> bool:
        """Every subscriber in the graph is connected to `publisher`."""
        return publisher.get_subscription_count() >= len(self.node.get_subscriptions_info_by_topic(topic))

    def spin_until(self, done: Callable[[], bool], seconds: float) -> bool:
        wall_limit = time.monotonic() + seconds
        while not done():
            self.executor.spin_once(timeout_sec=0.1)
            self.nodes.check_alive()
            if time.monotonic() > wall_limit:
                return done()
        return True

    def wait_for(self, what: str, ready: Callable[[], bool], seconds: float = CONNECT_S) -> None:
        if not self.spin_until(ready, seconds):
            raise UserError(f"{what} was not ready in {seconds:g} s (logs: {self.nodes.log_dir})")

    def connect(self, request: SilRequest) -> None:
        """The robot moves once policy_node is active: before that, this operator must have the start state (time
        zero of its script), the recorder must be listening, instruction_node (it subscribes once its model is
        loaded) ready to hear the first instruction; else the first seconds of a lockstep run, which takes no time
        at all, go unrecorded or uncommanded."""
        self.wait_for("sim_bridge_node", lambda: self.operator.seen)
        if request.record:  # every sensor topic: the recorder discovers each publisher on its own, a tick apart or more
            self.wait_for("field_recorder", lambda: all(self.subscribed("field_recorder", t) for t in SENSOR_TOPICS))
        if request.instructions:
            self.wait_for("instruction_node", lambda: self.subscribed("instruction_node", "/instruction"), MODEL_LOAD_S)
            if request.record:  # the recorder subscribes once it discovers this operator's publisher, which may be late
                self.wait_for("field_recorder", lambda: self.subscribed("field_recorder", "/instruction"))
            # the first instruction goes out at time zero: every subscriber must be connected to hear it
            publisher = self.operator.pub_instruction
            self.wait_for("the operator's /instruction", lambda: self.all_matched(publisher, "/instruction"))

    def activate_policy(self) -> None:
        """Configure policy_node, wait until it is connected to its command source, activate it."""
        from lifecycle_msgs.msg import Transition

        from ros_nodes.lifecycle_client import LifecycleClient

        nodes = self.nodes
        lifecycle = LifecycleClient(self.node, "policy_node", self.spin_until)
        self.wait_for("policy_node's lifecycle services", lifecycle.ready)
        if not lifecycle.transition(Transition.TRANSITION_CONFIGURE):
            raise UserError(f"policy_node: {nodes.last_line('policy_node', 'ERROR')} (logs: {nodes.log_dir})")
        self.wait_for(
            "policy_node's topics",
            lambda: self.subscribed("policy_node", "/cmd_vel") and self.publishes("policy_node", "/joint_commands"),
        )
        if self.operator.segments:
            self.wait_for("policy_node's /cmd_vel", lambda: self.all_matched(self.operator.pub_cmd, "/cmd_vel"))
        if not lifecycle.transition(Transition.TRANSITION_ACTIVATE):
            raise UserError(f"policy_node did not activate (logs: {nodes.log_dir})")
        self.operator.started = True

    def run(self, request: SilRequest, progress: Callable[[float], None] | None) -> None:
        """Spin until `request.duration` simulated seconds have passed."""
        duration, operator = request.duration, self.operator
        wall_limit = time.monotonic() + 60 + (duration * 1.5 if request.real_time else duration * 5)
        while operator.t < duration and time.monotonic() < wall_limit:
            self.executor.spin_once(timeout_sec=0.05)
            if progress is not None and operator.samples:
                progress(min(operator.t, duration))
            self.nodes.check_alive()
        if operator.t < duration:
            raise UserError(f"software-in-the-loop run did not reach {duration} s of simulated time in time")

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


def summarise(request: SilRequest, robot: RobotSpec, operator: Operator, nodes: NodeProcesses) -> dict:
    """The tracking KPIs against the commands the policy was given, and what ran."""
    from sim.tasks import load_task

    samples = np.array(operator.samples)
    summary = {
        "robot": robot.name,
        "artifact": request.artifact,
        "field_twin": request.field_twin,
        "duration_s": request.duration,
        "lockstep": not request.real_time,
        **tracking_kpis(samples, robot.control_dt, load_task(robot).min_base_height),
        "displacement": displacement(samples),
    }
    if request.instructions:
        summary["instructions"] = operator.executed()
    if request.robot_python:
        summary["robot_python"] = {n: py for n, py in nodes.interpreters.items() if n in ROBOT_NODES}
    return summary
