"""A real two-node Ray cluster on this machine: `ray start --head` and `ray start --address`, as docs/cluster.md
starts one on two machines, with one CPU each.

Each node is a `ray start --block` process in a process group of its own, with its own temp dir and ports, so
the cluster never meets another Ray instance on the machine (a CI run's, another test's) and is stopped by its
own process ids, never by `ray stop`. Ray 2.60 advertises a node on the machine's routable address even when
asked for 127.0.0.1 (it refuses loopback nodes in a multi-node cluster), so the cluster takes a token of its own
instead: token authentication, which every node and driver here is given, keeps anyone else out of it, and
keeps it from reading a token the user may keep in ~/.ray. The nodes' workers import this checkout: PYTHONPATH
puts it first, before whatever copy the virtualenv has installed.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 180  # a loaded 2-core machine starts a node in 10-30 s

# the nodes' IDs by temp dir, once both are registered with the head (a driver's view of the cluster)
_PROBE = """
import json, sys, time
import ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
deadline = time.monotonic() + float(sys.argv[2])
while len(alive := [n for n in ray.nodes() if n["Alive"]]) < 2 and time.monotonic() < deadline:
    time.sleep(0.5)
print(json.dumps({n["NodeID"]: n["RayletSocketName"] for n in alive}))
"""


def _free_ports(count: int) -> list[int]:
    """Ports nothing listens on now (held open together, so they differ)."""
    held = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("", 0))  # every interface: the nodes listen on the machine's address
        held.append(s)
    ports = [s.getsockname()[1] for s in held]
    for s in held:
        s.close()
    return ports


@dataclass
class RayNode:
    name: str
    temp_dir: Path
    process: subprocess.Popen  # `ray start --block`; the node's processes are in its process group
    node_id: str = ""

    def raylet_pid(self) -> int:
        for child in psutil.Process(self.process.pid).children(recursive=True):
            if child.name() == "raylet":
                return child.pid
        raise RuntimeError(f"the {self.name} node has no raylet process")

    def running(self, task: str) -> bool:
        """Whether one of this node's workers executes `task` now (Ray titles a worker process ray::<task>)."""
        return any(
            _cmdline(p).startswith(f"ray::{task}") for p in psutil.Process(self.process.pid).children(recursive=True)
        )

    def stop(self) -> None:
        """SIGTERM: `ray start --block` stops its node's processes; then SIGKILL whatever is left in its group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # it exited meanwhile
        return ""


@dataclass
class RayCluster:
    root: Path
    address: str = ""  # the head's GCS, host:port
    nodes: list[RayNode] = field(default_factory=list)
    token: str = field(default_factory=lambda: secrets.token_hex(32))

    @property
    def env(self) -> dict:
        """The environment of the nodes and of the drivers the tests start: this checkout first on the path,
        the cluster's token."""
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        ray_config = {
            # a stopping node waits up to 30 s by default for Ray Serve to drain it: nothing here serves
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
            # the head checks each node every second instead of every 3: a killed node is found dead after 5
            # failed checks, 5 s instead of 15 (a live node still has 10 s to answer each)
            "RAY_health_check_period_ms": "1000",
        }
        return {**env, "PYTHONPATH": path, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token, **ray_config}

    @property
    def head(self) -> RayNode:
        return self.nodes[0]

    @property
    def worker(self) -> RayNode:
        return self.nodes[1]

    def start(self) -> RayCluster:
        gcs, client, dashboard = _free_ports(3)
        head = [RAY, "start", "--head", "--port", str(gcs), "--ray-client-server-port", str(client)]
        # the dashboard's process runs without its UI too, on a port of its own
        head += ["--include-dashboard", "false", "--dashboard-port", str(dashboard)]
        self.nodes.append(self._start_node("head", head))
        address_file = self.head.temp_dir / "ray_current_cluster"  # written once the head is up
        self._wait(lambda: address_file.is_file(), self.head, "the head did not start")
        self.address = address_file.read_text().strip()
        # one log monitor per machine: a second would send the driver every line twice
        worker = [RAY, "start", "--address", self.address, "--include-log-monitor", "false"]
        self.nodes.append(self._start_node("worker", worker))
        ids = self._node_ids()
        for node in self.nodes:
            node.node_id = next(i for i, socket_path in ids.items() if socket_path.startswith(str(node.temp_dir)))
        return self

    def _start_node(self, name: str, command: list[str]) -> RayNode:
        temp_dir = self.root / name
        temp_dir.mkdir()
        ports = _free_ports(6)
        command = [
            *command,
            "--block",
            "--num-cpus",
            "1",
            "--num-gpus",
            "0",
            "--object-store-memory",
            str(200 * 1024**2),
            "--temp-dir",
            str(temp_dir),
            "--disable-usage-stats",
            *("--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1])),
            *("--dashboard-agent-listen-port", str(ports[2]), "--dashboard-agent-grpc-port", str(ports[3])),
            *("--runtime-env-agent-port", str(ports[4]), "--metrics-export-port", str(ports[5])),
        ]
        with open(self.root / f"{name}.log", "w") as log:
            process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO
            )
        return RayNode(name, temp_dir, process)

    def _wait(self, ready, node: RayNode, message: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            if node.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{message}: {self.log(node)[-3000:]}")
            time.sleep(0.2)

    def _node_ids(self) -> dict[str, str]:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, self.address, str(START_TIMEOUT_S)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S + 60,
        )
        ids = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {}
        if len(ids) < 2:
            raise RuntimeError(f"the worker node did not join the head: {out.stderr[-2000:]}{self.log(self.worker)}")
        return ids

    def log(self, node: RayNode) -> str:
        return (self.root / f"{node.name}.log").read_text()

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> RayCluster:
    """Start the two nodes. Their temp dirs are in /tmp, not in TMPDIR: Ray's socket paths below a node's temp
    dir (session_<time>_<pid>/sockets/plasma_store, about 62 characters) must stay under 108, which a CI's TMPDIR
    would leave too little room for."""
    cluster = RayCluster(Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp")))
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise
