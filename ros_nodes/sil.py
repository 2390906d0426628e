"""`sim2real sil`: software in the loop. The robot's node set runs as separate processes over real DDS:
sim_bridge_node plays the robot (optionally a field twin with hidden parameter offsets), policy_node runs the
artifact, field_recorder logs MCAP, and an operator in this process plays a /cmd_vel script. The bridge owns
/clock and steps as soon as each command arrives, so a run goes faster than real time. Prints tracking KPIs.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from edge.errors import UserError

HELP = "Run policy_node against a twin over ROS 2 (software in the loop) and report tracking KPIs."
EXAMPLES = """examples:
  sim2real sil --artifact policy/ --duration 20
  sim2real sil --artifact policy/ --field-twin field.yaml --record runs/sil/logs
  sim2real sil --artifact policy/ --commands my_script.yaml --real-time

field.yaml holds hidden twin parameters, e.g. {friction: 0.5, payload_kg: 3.0, latency_s: 0.02}.
"""
DEFAULT_COMMANDS = Path(__file__).resolve().parent.parent / "config" / "sil" / "default_commands.yaml"
SETTLE_S = 1.0  # after a command change, errors are not counted for this long (as in campaigns: sim.kpis)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--artifact", required=True, help="policy artifact directory")
    p.add_argument("--duration", type=float, default=20.0, help="simulated seconds (default 20)")
    p.add_argument("--field-twin", default="", help="YAML of hidden twin parameters (default: nominal twin)")
    p.add_argument("--commands", default=str(DEFAULT_COMMANDS), help="YAML list of {vx, vy, wz, duration_s}")
    p.add_argument("--record", default="", help="record MCAP field logs into this directory")
    p.add_argument("--backend", default="auto", help="policy backend: auto, tensorrt, onnxruntime")
    p.add_argument("--real-time", action="store_true", help="wall-clock pace instead of lockstep")
    p.add_argument("--allow-unvalidated", action="store_true", help="run an artifact no campaign has passed")
    p.add_argument("--json", default="", help="write the KPI summary to this file")


@dataclass
class Segment:
    vx: float
    vy: float
    wz: float
    duration_s: float


def load_commands(path: str | Path) -> list[Segment]:
    raw = yaml.safe_load(Path(path).read_text())
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: expected a non-empty list of {{vx, vy, wz, duration_s}}")
    try:
        segments = [Segment(float(s.get("vx", 0)), float(s.get("vy", 0)), float(s.get("wz", 0)),
                            float(s["duration_s"])) for s in raw]
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ValueError(f"{path}: each segment needs numeric vx, vy, wz and duration_s") from None
    if any(s.duration_s <= 0 for s in segments):
        raise ValueError(f"{path}: segment durations must be positive")
    return segments


def command_at(segments: list[Segment], t: float) -> np.ndarray:
    """The command at time t (the script repeats)."""
    t = t % sum(s.duration_s for s in segments)
    for s in segments:
        if t < s.duration_s:
            return np.array([s.vx, s.vy, s.wz])
        t -= s.duration_s
    return np.array([segments[-1].vx, segments[-1].vy, segments[-1].wz])


def tracking_kpis(samples: np.ndarray, dt: float, min_base_height: float) -> dict:
    """samples: rows (t, cmd_vx, cmd_vy, cmd_wz, vx, vy, wz, z), one per control step; scored as campaigns are."""
    from sim.kpis import count_events, settled, tracking_errors

    commands, lin, ang = samples[:, 1:4], np.zeros((len(samples), 3)), np.zeros((len(samples), 3))
    lin[:, :2], ang[:, 2] = samples[:, 4:6], samples[:, 6]
    err_lin, err_ang = tracking_errors(commands, lin, ang, settled(commands, dt, SETTLE_S))
    return {"samples": int(len(samples)), "tracking_error_lin": float(err_lin), "tracking_error_ang": float(err_ang),
            "falls": int(count_events(samples[:, 7] < min_base_height))}


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


def run_sil(artifact: str, duration: float, field_twin: str = "", commands: str | Path = DEFAULT_COMMANDS,
            record: str = "", backend: str = "auto", real_time: bool = False, allow_unvalidated: bool = False,
            progress=None) -> dict:
    """Run the node set for `duration` simulated seconds; return the KPI summary."""
    import rclpy
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data

    from edge.manifest import load_manifest
    from edge.validation import require_validated
    from sim.robot import load_robot

    manifest = load_manifest(artifact)  # fails early, with the reason, on a bad artifact
    require_validated(manifest, allow_unvalidated, artifact)
    robot = load_robot(manifest.robot["name"])
    segments = load_commands(commands)
    lockstep = not real_time
    log_dir = Path(tempfile.mkdtemp(prefix="sil-logs-"))
    procs = [
        _start("sim_bridge_node", {"robot": robot.name, "field_twin": field_twin or "''",
                                   "lockstep": str(lockstep).lower()}, log_dir),
        _start("policy_node", {"artifact": artifact, "backend": backend, "use_sim_time": str(lockstep).lower(),
                               "trigger": "joint_states" if lockstep else "timer",
                               "allow_unvalidated": str(allow_unvalidated).lower()}, log_dir),
    ]
    if record:
        procs.append(_start("field_recorder", {"output_dir": record, "use_sim_time": str(lockstep).lower()},
                            log_dir))

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("sil_operator", context=context,
                             parameter_overrides=[Parameter("use_sim_time", value=lockstep)])
    pub = node.create_publisher(Twist, "/cmd_vel", 10)
    samples: list[list[float]] = []
    start = {"t": None}

    def on_odom(msg: Odometry) -> None:
        now = node.get_clock().now().nanoseconds * 1e-9
        if start["t"] is None:
            start["t"] = now
        t = now - start["t"]
        cmd = command_at(segments, t)
        pub.publish(Twist(linear=type(msg.twist.twist.linear)(x=cmd[0], y=cmd[1]),
                          angular=type(msg.twist.twist.angular)(z=cmd[2])))
        v, w = msg.twist.twist.linear, msg.twist.twist.angular
        samples.append([t, *cmd, v.x, v.y, w.z, msg.pose.pose.position.z])

    node.create_subscription(Odometry, "/odom", on_odom, qos_profile_sensor_data)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    wall_limit = time.monotonic() + 60 + (duration * 1.5 if real_time else duration * 5)
    try:
        while (not samples or samples[-1][0] < duration) and time.monotonic() < wall_limit:
            executor.spin_once(timeout_sec=0.05)
            if progress is not None and samples:
                progress(min(samples[-1][0], duration))
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                name = dead[0].args[2].split(".")[-1]
                tail = (log_dir / f"{name}.log").read_text()[-400:].strip().splitlines()
                raise UserError(f"{name} exited early: {tail[-1] if tail else 'no output'} (logs: {log_dir})")
        if not samples or samples[-1][0] < duration:
            raise UserError(f"software-in-the-loop run did not reach {duration} s of simulated time in time")
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        _stop(procs)
    kpis = tracking_kpis(np.array(samples), robot.control_dt, robot.termination.min_base_height)
    return {"robot": robot.name, "artifact": str(artifact), "field_twin": field_twin, "duration_s": duration,
            "lockstep": lockstep, **kpis}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    with Progress(console=Console(stderr=True)) as bar:
        task = bar.add_task("software in the loop (simulated s)", total=args.duration)
        summary = run_sil(args.artifact, args.duration, args.field_twin, args.commands, args.record, args.backend,
                          args.real_time, args.allow_unvalidated, progress=lambda t: bar.update(task, completed=t))
    table = Table(title=f"{summary['robot']}, {args.duration:g} s simulated",
                  caption=f"means after {SETTLE_S:g} s settling per command")
    table.add_column("KPI")
    table.add_column("value", justify="right")
    for key in ("tracking_error_lin", "tracking_error_ang", "falls", "samples"):
        table.add_row(key, f"{summary[key]:.3f}" if isinstance(summary[key], float) else str(summary[key]))
    Console().print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0
