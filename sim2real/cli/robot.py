"""`sim2real robot`: bring your own robot. `robot init` writes the robot YAML from the robot's own MJCF."""

from __future__ import annotations

import argparse

HELP = "Bring your own robot: write its robot YAML from its MJCF (actuators, keyframe, feet, base)."
EXAMPLES = """examples:
  sim2real robot init go1.xml                          # writes go1.yaml beside go1.xml
  sim2real robot init go1.xml -o config/robots/go1.yaml --force
  sim2real robot init crawler.xml --kp 20 --kd 0.5 --torque-limit 5   # an MJCF without actuators
then:
  sim2real demo --robot go1.yaml                       # look at it in the twin
  sim2real train --robot go1.yaml
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = sub.add_parser(
        "init",
        help="write the robot YAML from an MJCF",
        description="Write the robot YAML from an MJCF: joints in actuator order, kp, kd and torque limits from "
        "its position actuators, the default pose and base height from its 'home' keyframe, foot geoms, the base "
        "body with the free joint. Prints what it guessed and what to check, one line each.",
    )
    init.add_argument("mjcf", help="the robot's MJCF file (meshes found from its own directory)")
    init.add_argument("-o", "--out", default=None, help="robot YAML to write (default: MJCF.yaml beside the MJCF)")
    init.add_argument("--force", action="store_true", help="replace an existing YAML")
    gains = "replaces what the actuators say; needed when the MJCF has no position actuators"
    init.add_argument("--kp", type=float, default=None, help=f"PD stiffness for every joint (N m/rad); {gains}")
    init.add_argument("--kd", type=float, default=None, help=f"PD damping for every joint (N m s/rad); {gains}")
    init.add_argument(
        "--torque-limit",
        type=float,
        default=None,
        help="torque limit for every joint (N m); needed when the actuators have no force range",
    )


def run(args: argparse.Namespace) -> int:
    from sim.robot_init import init_robot

    out, draft = init_robot(
        args.mjcf, args.out, force=args.force, kp=args.kp, kd=args.kd, torque_limit=args.torque_limit
    )
    v = draft.values
    print(f"wrote {out}: {v['name']}, {len(v['joints'])} joints ({v['control_mode']}), base {v['base_body']}")
    for line in draft.notes:
        print(f"  {line}")
    print(f"next: sim2real demo --robot {out}")
    return 0
