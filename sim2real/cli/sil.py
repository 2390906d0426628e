"""`sim2real sil`: software in the loop (`sim2real.sil.run_sil`): the robot's node set against a twin over ROS 2,
with a table of the tracking KPIs and, for an instruction script, the plan each instruction got."""

from __future__ import annotations

import argparse
import json
import math

from sim2real.cli.keys import add_trust_flags, trust_policy
from sim2real.sil import SETTLE_S, SilRequest

HELP = "Run policy_node against a twin over ROS 2 (software in the loop) and report tracking KPIs."
EXAMPLES = """examples:
  sim2real sil --artifact policy/ --duration 20
  sim2real sil --artifact policy/ --field-twin field.yaml --record runs/sil/logs
  sim2real sil --artifact policy/ --field-twin field.yaml --gyro-bias 0 0 0.02   # policy_node's IMU calibration
  sim2real sil --artifact policy/ --robot-python /opt/robot-venv/bin/python      # the robot's installed nodes
  sim2real sil --artifact policy/ --commands my_script.yaml --real-time
  sim2real sil --artifact policy/ --instructions config/sil/instructions.yaml --instruction-model runs/rlhf/onnx

field.yaml holds hidden twin parameters, e.g. {friction: 0.5, payload_kg: 3.0, latency_s: 0.02}.
An instruction script is a YAML list of {t_s, text}: each text goes out on /instruction at simulated time t_s.
"""


# SilRequest's fields with a flag (its trust policy's are in the trust group); --json is the command's own
FLAGS = (
    "artifact",
    "duration",
    "field_twin",
    "commands",
    "instructions",
    "instruction_model",
    "instruction_backend",
    "record",
    "backend",
    "gyro_bias",
    "real_time",
    "robot_python",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.config import add_flags

    add_flags(p, SilRequest, FLAGS)
    add_trust_flags(p, SilRequest)
    p.add_argument("--json", default="", help="write the KPI summary to this file")


def request_of(args: argparse.Namespace) -> SilRequest:
    """The SilRequest the flags give (a flag not given keeps the field's default)."""
    from edge.config import check_values, flag_values

    given = check_values(SilRequest, flag_values(args, SilRequest, FLAGS), name="SilRequest")
    return SilRequest(**given, trust=trust_policy(args))


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from sim2real.cli.console import progress_bar
    from sim2real.sil import run_sil

    request = request_of(args)
    with progress_bar("percent", "remaining") as bar:
        task = bar.add_task("software in the loop (simulated s)", total=request.duration)
        summary = run_sil(request, progress=lambda t: bar.update(task, completed=t))
    table = Table(
        title=f"{summary['robot']}, {request.duration:g} s simulated",
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
