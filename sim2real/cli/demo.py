"""`sim2real demo`: roll out each robot's batched twin under its hand-written controller and print a summary.

Progress and a table, no training: a quick check that a fresh machine's twin stack works end to end.
"""

from __future__ import annotations

import argparse
import time

from sim2real.errors import UserError

HELP = "Roll out the batched digital twin of each robot under a hand-written controller."
EXAMPLES = """examples:
  sim2real demo                         # rover and quadruped, 64 envs each, 5 s of simulated time
  sim2real demo --robot rover --envs 256 --seconds 10
  sim2real demo --robot my_robot.yaml   # bring your own MJCF + YAML
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--robot", action="append", help="robot name or YAML path (repeatable; default: rover and quadruped)"
    )
    p.add_argument("--envs", type=int, default=64, help="parallel envs per robot (default 64)")
    p.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per env (default 5)")
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.table import Table

    from sim.controllers import controller_for
    from sim.twin import BatchedTwin
    from sim2real.cli.console import make_console, progress_bar

    if args.envs < 1 or args.seconds <= 0:
        raise UserError("--envs must be >= 1 and --seconds > 0")
    console = make_console()  # pipes and CI logs get a readable width
    table = Table(title="Twin rollout (hand-written controllers, randomisation on)")
    for col in ("robot", "envs", "env-steps", "env-steps/s", "|vx err| m/s", "|wz err| rad/s", "falls", "NaN act"):
        table.add_column(col, justify="right")
    robots = args.robot or ["rover", "quadruped"]
    with progress_bar("percent", "remaining", console=console) as progress:
        for robot in robots:
            twin = BatchedTwin(robot, num_envs=args.envs, seed=args.seed)
            steps = max(1, int(round(args.seconds / twin.spec.control_dt)))
            task = progress.add_task(f"{twin.spec.name:>10}", total=steps)
            controller = controller_for(twin)
            twin.reset(seed=args.seed)
            err_vx, err_wz, falls = [], [], 0
            start = time.perf_counter()
            for _ in range(steps):
                _, _, terminated, _, info = twin.step(controller())
                err_vx.append(info["tracking_error"]["vx"].mean())
                err_wz.append(info["tracking_error"]["wz"].mean())
                falls += int(terminated.sum())
                progress.advance(task)
            elapsed = time.perf_counter() - start
            table.add_row(
                twin.spec.name,
                str(args.envs),
                f"{steps * args.envs:,}",
                f"{steps * args.envs / elapsed:,.0f}",
                f"{np.mean(err_vx):.3f}",
                f"{np.mean(err_wz):.3f}",
                str(falls),
                str(twin.nan_action_count),
            )
            twin.close()
    console.print(table)
    console.print("Errors are means over envs and steps. The quadruped's hand-written controller only stands: tracking")
    console.print("its commands is the trained policy's job (`sim2real train --robot quadruped`).")
    return 0
