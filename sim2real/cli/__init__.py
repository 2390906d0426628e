"""`sim2real`: one console script, one module per subcommand.

A subcommand module defines HELP (one line), EXAMPLES (text shown under --help), add_arguments(parser) and
run(args) -> int. Errors a user can fix (edge.errors.UserFixableError and its subclasses: bad config, missing file, bad
artifact) become one line on stderr and exit code 2, with no traceback (SIM2REAL_DEBUG=1 shows it). Any other
exception is a bug and shows its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from edge.errors import UserFixableError

# name -> module; a module's flags (add_arguments, which may import what its configs need) are built only for the
# subcommand that runs, so `sim2real --help` stays fast
SUBCOMMANDS = {
    "demo": "sim2real.cli.demo",
    "export": "sim2real.cli.export",
    "keys": "sim2real.cli.keys",
    "lineage": "sim2real.cli.lineage",
    "loop": "sim2real.cli.loop",
    "retrain": "sim2real.cli.retrain",
    "rlhf": "sim2real.cli.rlhf",
    "robot": "sim2real.cli.robot",
    "sil": "sim2real.cli.sil",
    "task": "sim2real.cli.task",
    "train": "sim2real.cli.train",
    "validate": "sim2real.cli.validate",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `command` one whose other subcommands have no arguments (`main` parses one)."""
    parser = argparse.ArgumentParser(
        prog="sim2real",
        description="Sim-to-real suite: train in digital twins, validate, deploy to ROS 2, retrain from field logs.",
        epilog="Run 'sim2real COMMAND --help' for a command's options and examples.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=module.EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command is None or command == name:
            module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(next(iter(argv), "")).parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("sim2real: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sim2real ... | head`: the reader left; say nothing more, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except UserFixableError as e:
        if os.environ.get("SIM2REAL_DEBUG"):
            raise
        print(f"sim2real {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
