"""The ROS executables' entry points (setup.py's console_scripts, what `ros2 run edge <exe>` and launch start). Each
imports its node's module only here, so that a SIGINT while it still imports numpy, ONNX Runtime or MuJoCo (Ctrl-C
right after `ros2 launch`, or launch stopping every node because another one failed) ends it quietly, exit 0,
instead of with a KeyboardInterrupt traceback. `python -m ros_nodes.<node>` runs the same `main`."""

from __future__ import annotations

import importlib
import sys


def _run(node: str) -> None:
    try:
        module = importlib.import_module(f"ros_nodes.{node}")
    except KeyboardInterrupt:  # stopped before it started: nothing to clean up
        sys.exit(0)
    module.main()


def policy_node() -> None:
    _run("policy_node")


def sim_bridge_node() -> None:
    _run("sim_bridge_node")


def field_recorder() -> None:
    _run("field_recorder")


def instruction_node() -> None:
    _run("instruction_node")
