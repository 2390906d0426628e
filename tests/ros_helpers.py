"""Shared plumbing for tests over real DDS: node processes and an in-process probe node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


def _domain_block() -> int:
    """The first of 16 DDS domains (20-211) this test process draws from: the process id picks the block, so
    parallel runs on one machine rarely meet; inside a block, `ros_env` gives each pytest-xdist worker two (0-7)
    and `launch_domain` eight more (8-15), so one run's workers never share a domain."""
    return 20 + (os.getpid() % 12) * 16


def ros_env(own: bool = False) -> dict[str, str]:
    """This test process's DDS domain, discovery on localhost. `own`: its second domain, for a subprocess whose
    nodes must never answer this process's calls."""
    env = dict(os.environ)
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    env.setdefault("ROS_DOMAIN_ID", str(_domain_block() + (worker % 4) * 2))
    if own:
        env["ROS_DOMAIN_ID"] = str(int(env["ROS_DOMAIN_ID"]) ^ 1)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return env


def launch_domain(k: int) -> str:
    """The k-th (0-7) of this process's domains for launches that run side by side: never one `ros_env` gives."""
    if not 0 <= k < 8:
        raise ValueError(f"launch domain {k}: 0-7")
    return str(_domain_block() + 8 + k)


class NodeProcess(subprocess.Popen):
    """A node in its own process; its output is collected in the background so the pipe never fills."""

    def __init__(self, args: list[str]):
        super().__init__(args, env=ros_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_output(self, text: str, timeout: float = 30.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.poll() is None:
            if text in self.output:
                return True
            time.sleep(0.1)
        return text in self.output


@contextmanager
def node_process(module: str, *params: str, stop_signal: int = signal.SIGINT):
    """Run `python -m module --ros-args -p k:=v ...` and stop it with `stop_signal` at the end."""
    args = [sys.executable, "-m", module, "--ros-args"]
    for p in params:
        args += ["-p", p]
    proc = NodeProcess(args)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(stop_signal)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def probe_node(name: str = "probe"):
    os.environ.update({k: v for k, v in ros_env().items() if k.startswith("ROS_")})
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node(name, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


def spin_until(executor: SingleThreadedExecutor, done: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.02)
        if done():
            return True
    return done()
