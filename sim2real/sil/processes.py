"""The run's node processes: started as `python -m ros_nodes.<node> --ros-args -p ...`, each logging to its own file,
watched for an early exit and stopped with SIGINT (as `ros2 launch` does) at the end."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from sim2real.errors import UserError

STOP_WAIT_S = 10.0  # a node that has not exited this long after SIGINT is killed


class NodeProcesses:
    def __init__(self) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix="sil-logs-"))
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, executable: str, params: dict) -> None:
        args = [sys.executable, "-m", f"ros_nodes.{executable}", "--ros-args"]
        for k, v in params.items():
            args += ["-p", f"{k}:={v}"]
        # a log file, not a pipe: a pipe nobody reads fills up and stalls the node
        with open(self.log_dir / f"{executable}.log", "w") as log:
            self.procs[executable] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def last_line(self, name: str, containing: str = "") -> str:
        """The node's last log line (with `containing` in it): what a failure is reported with."""
        lines = [line for line in (self.log_dir / f"{name}.log").read_text().strip().splitlines() if containing in line]
        return lines[-1] if lines else "no output"

    def check_alive(self) -> None:
        """Raises, with the node's last words, once any node has exited: the run cannot go on without it."""
        dead = [name for name, p in self.procs.items() if p.poll() is not None]
        if dead:
            raise UserError(f"{dead[0]} exited early: {self.last_line(dead[0])} (logs: {self.log_dir})")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs.values():
            try:
                p.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
