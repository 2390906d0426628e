"""`run_sil`: software in the loop. The robot's node set runs as separate processes over real DDS: sim_bridge_node
plays the robot (optionally a field twin with hidden parameter offsets), policy_node runs the artifact,
field_recorder logs MCAP, and an operator in this process drives it: either a /cmd_vel script, or (the deployment
stage of `sim2real loop`) an /instruction script that instruction_node turns into /cmd_vel. The bridge owns /clock
and steps as soon as each command arrives, so a run goes faster than real time. Returns tracking KPIs against the
commands the policy was given.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from sim2real.errors import UserError
from sim2real.sil.processes import ROBOT_NODES, NodeProcesses
from sim2real.sil.scoring import displacement, tracking_kpis
from sim2real.sil.scripts import DEFAULT_COMMANDS, load_commands, load_instructions

MODEL_LOAD_S = 300.0  # wall-clock wait for instruction_node to load its model
RESEND_S = 0.25  # a lockstep bridge sends an unanswered state again after this wall time
CONNECT_S = 60.0  # wall-clock wait for a node to come up or connect
SENSOR_TOPICS = ("/joint_states", "/imu/data", "/odom")  # what sim_bridge_node publishes for every robot


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
    instruction_backend: str = "auto",
    progress: Callable[[float], None] | None = None,
    robot_python: str | None = None,
    trusted_keys: Sequence[str | Path] = (),
    allow_unsigned: bool = False,
) -> dict:
    """Run the node set for `duration` simulated seconds; return the KPI summary. With `instructions` (a script
    of {t_s, text}) instruction_node runs `instruction_model` and its /cmd_vel is both the policy's command and
    the reference the KPIs score against; without, the /cmd_vel script `commands` is. `robot_python` runs the
    robot's nodes on the robot's own install (sim2real.sil.processes). The artifact (and the instruction model) must
    be signed by one of `trusted_keys` (public key files or directories) unless `allow_unsigned` (development only,
    with a WARN)."""
    # rclpy only here, so that `sim2real --help` and the scripts and scoring import without ROS
    import rclpy
    from lifecycle_msgs.msg import Transition
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from edge.manifest import load_manifest
    from edge.signing import require_signed
    from edge.validation import require_validated
    from ros_nodes.lifecycle_client import LifecycleClient
    from sim.robot import load_robot
    from sim.tasks import load_task
    from sim2real.sil.operator import Operator

    # the nodes start in their log directory: every path they get is absolute
    artifact, record = str(Path(artifact).resolve()), str(Path(record).resolve()) if record else ""
    field_twin = str(Path(field_twin).resolve()) if field_twin else ""
    instruction_model = str(Path(instruction_model).resolve()) if instruction_model else instruction_model
    trusted = [str(Path(k).resolve()) for k in trusted_keys]
    for directory in (artifact, *([instruction_model] if instructions and instruction_model else [])):
        signature = require_signed(directory, trusted, allow_unsigned)  # fails early, with the reason
        if not signature.passed:
            warnings.warn(signature.message, stacklevel=2)
    manifest = load_manifest(artifact)
    require_validated(manifest, allow_unvalidated, artifact)
    robot = load_robot(manifest.robot["name"])
    if instructions:
        if not instruction_model:
            raise UserError("an instruction script needs an instruction model (--instruction-model)")
        script, segments = load_instructions(instructions), None
    else:
        script, segments = None, load_commands(commands)
    lockstep, sim_time = not real_time, str(not real_time).lower()
    nodes = NodeProcesses(robot_python)
    nodes.start(
        "sim_bridge_node",
        {"robot": robot.name, "field_twin": field_twin or "''", "lockstep": sim_time, "lockstep_timeout_s": RESEND_S},
    )
    # configured and activated from here, as a lifecycle manager would, once everything is connected
    nodes.start(
        "policy_node",
        {
            "artifact": artifact,
            "backend": backend,
            "use_sim_time": sim_time,
            "trigger": "joint_states" if lockstep else "timer",
            "autostart": "false",
            "allow_unvalidated": str(allow_unvalidated).lower(),
            "trusted_keys": ",".join(trusted) or "''",
            "allow_unsigned": str(allow_unsigned).lower(),
        },
    )
    if record:
        nodes.start("field_recorder", {"output_dir": record, "use_sim_time": sim_time})
    if script:
        nodes.start(
            "instruction_node",
            {
                "model": instruction_model,
                "backend": instruction_backend,
                "artifact": artifact,
                "use_sim_time": sim_time,
                "trusted_keys": ",".join(trusted) or "''",
                "allow_unsigned": str(allow_unsigned).lower(),
            },
        )

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(
        "sil_operator", context=context, parameter_overrides=[Parameter("use_sim_time", value=lockstep)]
    )
    operator = Operator(node, segments, script, robot.control_dt, lockstep)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def subscribed(node_name: str, topic: str) -> bool:
        return any(i.node_name == node_name for i in node.get_subscriptions_info_by_topic(topic))

    def publishes(node_name: str, topic: str) -> bool:
        return any(i.node_name == node_name for i in node.get_publishers_info_by_topic(topic))

    def all_matched(publisher, topic: str) -> bool:  # every subscriber in the graph is connected to `publisher`
        return publisher.get_subscription_count() >= len(node.get_subscriptions_info_by_topic(topic))

    def spin_until(done: Callable[[], bool], seconds: float) -> bool:
        wall_limit = time.monotonic() + seconds
        while not done():
            executor.spin_once(timeout_sec=0.1)
            nodes.check_alive()
            if time.monotonic() > wall_limit:
                return done()
        return True

    def wait_for(what: str, ready: Callable[[], bool], seconds: float = CONNECT_S) -> None:
        if not spin_until(ready, seconds):
            raise UserError(f"{what} was not ready in {seconds:g} s (logs: {nodes.log_dir})")

    try:
        # the robot moves once policy_node is active: before that, this operator must have the start state (time
        # zero of its script), the recorder must be listening, instruction_node (it subscribes once its model is
        # loaded) ready to hear the first instruction, and policy_node connected to its command source; else the
        # first seconds of a lockstep run, which takes no time at all, go unrecorded or uncommanded
        wait_for("sim_bridge_node", lambda: operator.seen)
        if record:  # every sensor topic: the recorder discovers each publisher on its own, a tick apart or more
            wait_for("field_recorder", lambda: all(subscribed("field_recorder", t) for t in SENSOR_TOPICS))
        if script:
            wait_for("instruction_node", lambda: subscribed("instruction_node", "/instruction"), MODEL_LOAD_S)
        lifecycle = LifecycleClient(node, "policy_node", spin_until)
        wait_for("policy_node's lifecycle services", lifecycle.ready)
        if not lifecycle.transition(Transition.TRANSITION_CONFIGURE):
            raise UserError(f"policy_node: {nodes.last_line('policy_node', 'ERROR')} (logs: {nodes.log_dir})")
        wait_for(
            "policy_node's topics",
            lambda: subscribed("policy_node", "/cmd_vel") and publishes("policy_node", "/joint_commands"),
        )
        if segments:
            wait_for("policy_node's /cmd_vel", lambda: all_matched(operator.pub_cmd, "/cmd_vel"))
        if not lifecycle.transition(Transition.TRANSITION_ACTIVATE):
            raise UserError(f"policy_node did not activate (logs: {nodes.log_dir})")
        operator.started = True
        wall_limit = time.monotonic() + 60 + (duration * 1.5 if real_time else duration * 5)
        while operator.t < duration and time.monotonic() < wall_limit:
            executor.spin_once(timeout_sec=0.05)
            if progress is not None and operator.samples:
                progress(min(operator.t, duration))
            nodes.check_alive()
        if operator.t < duration:
            raise UserError(f"software-in-the-loop run did not reach {duration} s of simulated time in time")
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        nodes.stop()
    samples = np.array(operator.samples)
    summary = {
        "robot": robot.name,
        "artifact": str(artifact),
        "field_twin": field_twin,
        "duration_s": duration,
        "lockstep": lockstep,
        **tracking_kpis(samples, robot.control_dt, load_task(robot).min_base_height),
        "displacement": displacement(samples),
    }
    if script:
        summary["instructions"] = operator.executed()
    if robot_python:
        summary["robot_python"] = {n: py for n, py in nodes.interpreters.items() if n in ROBOT_NODES}
    return summary
