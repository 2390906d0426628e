"""The run's node processes: started as `python -m ros_nodes.<node> --ros-args -p ...`, each logging to its own file,
watched for an early exit and stopped with SIGINT (as `ros2 launch` does) at the end.

`robot_python`: the interpreter of the robot's own install (a venv with `.[robot,instruct]`, or a colcon
install's Python) that runs the robot's nodes; the twin (sim_bridge_node) stays on this one. Nodes start in the
log directory with the caller's PYTHONPATH removed, so an installed package is never shadowed by a checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from sim2real.errors import UserError

STOP_WAIT_S = 10.0  # a node that has not exited this long after SIGINT is killed
# the recorder stops last, once nothing publishes, and gets longer to finalise its segment on a loaded machine
RECORDER_STOP_WAIT_S = 60.0
ROBOT_NODES = ("policy_node", "instruction_node", "field_recorder")  # what the robot itself runs


class NodeProcesses:
    def __init__(self, robot_python: str | None = None) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix="sil-logs-"))
        self.procs: dict[str, subprocess.Popen] = {}
        self.robot_python = robot_python
        self.interpreters: dict[str, str] = {}

    def start(self, executable: str, params: dict) -> None:
        python = self.robot_python if self.robot_python and executable in ROBOT_NODES else sys.executable
        args = [python, "-m", f"ros_nodes.{executable}", "--ros-args"]
        for k, v in params.items():
            args += ["-p", f"{k}:={v}"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if python == sys.executable and "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]  # this install's own code, as the caller sees it
        # a log file, not a pipe: a pipe nobody reads fills up and stalls the node
        with open(self.log_dir / f"{executable}.log", "w") as log:
            self.procs[executable] = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, cwd=self.log_dir, env=env
            )
        self.interpreters[executable] = python

    def last_line(self, name: str, containing: str = "") -> str:
        """The node's last log line (with `containing` in it): what a failure is reported with."""
        lines = [line for line in (self.log_dir / f"{name}.log").read_text().strip().splitlines() if containing in line]
        return lines[-1] if lines else "no output"

    def check_alive(self) -> None:
        """Raises, with the node's last words, once any node has exited: the run cannot go on without it."""
        dead = [name for name, p in self.procs.items() if p.poll() is not None]
        if dead:
            raise UserError(f"{dead[0]} exited early: {self.last_line(dead[0])} (logs: {self.log_dir})")

    def stop(self) -> list[str]:
        """SIGINT every node, the recorder last (it records up to the others' last message); returns the nodes that
        had to be killed."""
        producers = {n: p for n, p in self.procs.items() if n != "field_recorder"}
        killed = self._interrupt(producers, STOP_WAIT_S)
        recorder = {n: p for n, p in self.procs.items() if n == "field_recorder"}
        return killed + self._interrupt(recorder, RECORDER_STOP_WAIT_S)

    @staticmethod
    def _interrupt(procs: dict[str, subprocess.Popen], wait_s: float) -> list[str]:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        killed = []
        for name, p in procs.items():
            try:
                p.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                killed.append(name)
        return killed
