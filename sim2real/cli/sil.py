"""`sim2real sil`: software in the loop (`sim2real.sil.run_sil`): the robot's node set against a twin over ROS 2,
with a table of the tracking KPIs and, for an instruction script, the plan each instruction got."""

from __future__ import annotations

import argparse
import json
import math

from sim2real.cli.keys import add_trust_arguments
from sim2real.sil import DEFAULT_COMMANDS, SETTLE_S

HELP = "Run policy_node against a twin over ROS 2 (software in the loop) and report tracking KPIs."
EXAMPLES = """examples:
  sim2real sil --artifact policy/ --duration 20
  sim2real sil --artifact policy/ --field-twin field.yaml --record runs/sil/logs
  sim2real sil --artifact policy/ --robot-python /opt/robot-venv/bin/python      # the robot's installed nodes
  sim2real sil --artifact policy/ --commands my_script.yaml --real-time
  sim2real sil --artifact policy/ --instructions config/sil/instructions.yaml --instruction-model runs/rlhf/onnx

field.yaml holds hidden twin parameters, e.g. {friction: 0.5, payload_kg: 3.0, latency_s: 0.02}.
An instruction script is a YAML list of {t_s, text}: each text goes out on /instruction at simulated time t_s.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edge.instruct.onnx_generator import BACKENDS as INSTRUCTION_BACKENDS
    from edge.runtime import BACKENDS

    p.add_argument("--artifact", required=True, help="policy artifact directory")
    p.add_argument("--duration", type=float, default=20.0, help="simulated seconds (default 20)")
    p.add_argument(
        "--field-twin",
        default="",
        help="field robot YAML: hidden twin parameters and effects the twin cannot express (default: nominal twin)",
    )
    p.add_argument("--commands", default=str(DEFAULT_COMMANDS), help="YAML list of {vx, vy, wz, duration_s}")
    p.add_argument(
        "--instructions",
        default="",
        help="YAML list of {t_s, text} for instruction_node (replaces --commands; needs --instruction-model)",
    )
    p.add_argument(
        "--instruction-model", default="", help="exported instruction model directory (the rlhf pipeline's onnx/)"
    )
    p.add_argument(
        "--instruction-backend",
        choices=INSTRUCTION_BACKENDS,
        default=INSTRUCTION_BACKENDS[0],
        help="instruction_node's ONNX Runtime providers (default %(default)s)",
    )
    p.add_argument("--record", default="", help="record MCAP field logs into this directory")
    p.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0], help="policy backend (default %(default)s)")
    p.add_argument("--real-time", action="store_true", help="wall-clock pace instead of lockstep")
    p.add_argument("--allow-unvalidated", action="store_true", help="run an artifact no campaign has passed")
    add_trust_arguments(p, "the artifact's signature must verify against")
    p.add_argument("--json", default="", help="write the KPI summary to this file")
    p.add_argument(
        "--robot-python",
        default="",
        help="run policy_node, instruction_node and field_recorder on this interpreter: the robot's own install "
        "(a venv with edge[robot,instruct]); the twin stays on this one",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from edge.signing import TrustPolicy
    from sim2real.cli.console import progress_bar
    from sim2real.sil import SilRequest, run_sil

    with progress_bar("percent", "remaining") as bar:
        task = bar.add_task("software in the loop (simulated s)", total=args.duration)
        request = SilRequest(
            args.artifact,
            args.duration,
            field_twin=args.field_twin,
            commands=args.commands,
            record=args.record,
            backend=args.backend,
            real_time=args.real_time,
            instructions=args.instructions or None,
            instruction_model=args.instruction_model or None,
            instruction_backend=args.instruction_backend,
            robot_python=args.robot_python or None,
            trust=TrustPolicy(args.trusted_keys, args.allow_unsigned, args.allow_unvalidated),
        )
        summary = run_sil(request, progress=lambda t: bar.update(task, completed=t))
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
