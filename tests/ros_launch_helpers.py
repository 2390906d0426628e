"""ROS 2's own tools for the tests, as a user runs them: `colcon build` of this repository in a workspace, then
`ros2 launch`, `ros2 run` and the `ros2` command line in a clean shell that sources the workspace's
`install/setup.bash`. No mock of any of them.

Where the tools come from: the development venv (`make setup` installs launch, launch_ros and ros2cli from
`../shared/ros2` and colcon from PyPI when the machine has no apt ROS 2), else apt ROS 2 Jazzy
(`/opt/ros/jazzy/setup.bash`). With neither, the tests skip with that reason, or fail when
SIM2REAL_REQUIRE_ROS_TOOLS=1 (CI sets it: there they must run).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.ros_helpers import launch_domain

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
APT_SETUP = Path("/opt/ros/jazzy/setup.bash")
REQUIRE = "SIM2REAL_REQUIRE_ROS_TOOLS"
CLI_TIMEOUT_S = 60.0  # one `ros2 ...` call (a lost service reply would hang `ros2 lifecycle get` for ever)


def tools_setup() -> str | None:
    """The shell line that puts `ros2` and `colcon` on the PATH ("" when the venv has them), None: not here."""
    if (VENV_BIN / "ros2").is_file() and (VENV_BIN / "colcon").is_file():
        return ""
    if APT_SETUP.is_file():
        return f"source {APT_SETUP}"
    return None


def require_tools() -> str:
    setup = tools_setup()
    if setup is None:
        why = (
            f"no ROS 2 launch tools: neither {VENV_BIN}/ros2 and colcon (`make setup` installs them from "
            f"../shared/ros2 and PyPI) nor {APT_SETUP}"
        )
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{why}; {REQUIRE}=1 requires them", pytrace=False)
        pytest.skip(why)
    return setup


class RosShell:
    """A clean environment (no PYTHONPATH, no checkout) in which `install/setup.bash` is sourced before each command,
    on a domain of its own, discovery kept on localhost."""

    def __init__(self, setup: str, install: Path, domain: str, log_dir: Path):
        self.prefix = " && ".join(s for s in (setup, f"source {install}/setup.bash") if s)
        self.env = {
            "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8",
            "ROS_DOMAIN_ID": domain,
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            "ROS_LOG_DIR": str(log_dir),
            "RCUTILS_COLORIZED_OUTPUT": "0",
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
        if not setup:  # the venv's tools: the wheels' and launch's packages are found through the venv's prefix
            self.env["AMENT_PREFIX_PATH"] = str(VENV_BIN.parent)
        self.procs: list[subprocess.Popen] = []
        self.daemon = False

    def _args(self, command: str) -> list[str]:
        return ["bash", "-c", f"{self.prefix} && {command}"]

    def run(self, command: str, cwd: Path | None = None, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(
            self._args(command),
            env=self.env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate()
            pytest.fail(f"`{command}` took longer than {timeout:g} s: {out[-2000:]}", pytrace=False)
        return subprocess.CompletedProcess(command, proc.returncode, out)

    def ok(self, command: str, **kw) -> str:
        """Its output; the test fails with that output when the command exits non-zero."""
        done = self.run(command, **kw)
        assert done.returncode == 0, f"`{command}` exited {done.returncode}: {done.stdout[-3000:]}"
        return done.stdout

    def start(self, command: str, log: Path, cwd: Path) -> subprocess.Popen:
        """A long-running command (`exec ros2 launch ...`) in its own process group, its output in `log`."""
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # children would inherit an ignored SIGINT
            signal.signal(signal.SIGINT, signal.default_int_handler)
        with open(log, "w") as out:
            proc = subprocess.Popen(
                self._args(f"exec {command}"),
                env=self.env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,  # non-interactive, as under a service manager or CI
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def start_daemon(self) -> None:
        """The ros2 daemon caches the graph for the CLI (without it every call spins for discovery)."""
        self.daemon = True
        self.ok("ros2 daemon start")

    def wait_for_nodes(self, names: set[str], timeout: float = 90.0) -> str:
        end, out = time.monotonic() + timeout, ""
        while time.monotonic() < end:
            out = self.run("ros2 node list").stdout
            if names <= set(out.split()):
                return out
            time.sleep(1.0)
        missing = sorted(names - set(out.split()))
        pytest.fail(f"nodes {missing} did not appear in `ros2 node list`: {out}", pytrace=False)

    def close(self) -> None:
        """Stop whatever is still running and the daemon this shell started. Each command's whole process group: a
        node can outlive a `ros2 launch` that ended (one it started while failing)."""
        for proc in self.procs:
            _kill_group(proc)
        if self.daemon:
            self.run("ros2 daemon stop", timeout=30)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGINT to the process group the command leads, SIGKILL to what is left of it after 15 s."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # the group is empty
        end = time.monotonic() + 15
        while time.monotonic() < end and _group_alive(proc.pid):
            proc.poll()
            time.sleep(0.1)
    proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@contextmanager
def ros_shell(setup: str, install: Path, k: int, log_dir: Path):
    shell = RosShell(setup, install, launch_domain(k), log_dir)
    try:
        yield shell
    finally:
        shell.close()


def source_files() -> list[Path]:
    """The repository's files as a clone has them (tracked and new, not ignored), relative to ROOT."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: everything but the usual build outputs
        skip = {".git", ".venv", "build", "install", "log", "runs", "__pycache__"}
        return [p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.parts)]
    return [Path(line) for line in out.splitlines() if (ROOT / line).is_file()]


def colcon_workspace(setup: str, ws: Path) -> Path:
    """This repository copied into `ws/src/edge` (as a robot clones it there) and built with `colcon build
    --packages-select edge`; returns the install directory."""
    src = ws / "src" / "edge"
    for rel in source_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    env = {
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }
    command = " && ".join(s for s in (setup, "colcon build --packages-select edge") if s)
    done = subprocess.run(["bash", "-c", command], cwd=ws, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"colcon build failed: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return ws / "install"


def echo_once(shell: RosShell, topic: str, timeout: float = 20.0) -> dict:
    """`ros2 topic echo --once` of a topic, its message as YAML."""
    out = shell.ok(f"ros2 topic echo --once --full-length --timeout {timeout:g} {topic}")
    return yaml.safe_load(out.split("\n---")[0])


def launch_lines(log: Path, process: str) -> list[str]:
    """The lines `ros2 launch` printed for one of its processes (`[policy_node-1] ...`)."""
    return [line for line in log.read_text().splitlines() if line.startswith(f"[{process}-")]


# launch_ros 0.26.6 (Jazzy): when a launch shuts down while LifecycleNode still waits for a node's change_state
# service (a node that failed before the other came up), the shutdown destroys the client under that wait, and the
# worker thread's InvalidHandle is printed as a traceback of launch's own. The launch still ends as asked.
_LAUNCH_ROS_SHUTDOWN_RACE = ("launch_ros/actions/lifecycle_node.py", "destruction was requested")


def tracebacks(out: str) -> list[str]:
    """The tracebacks in `ros2 launch` output, but for launch_ros's own shutdown race. A node's traceback is printed
    under its process prefix (`[policy_node-1] Traceback ...`), so it is never taken for launch's."""
    found = []
    for block in out.split("Traceback (most recent call last):")[1:]:
        body = []
        for line in block.splitlines()[1:]:
            if line.startswith("["):  # the next line `ros2 launch` logs: the traceback ended
                break
            body.append(line)
        text = "\n".join(body)
        if not (body and all(part in text for part in _LAUNCH_ROS_SHUTDOWN_RACE)):
            found.append(text[:2000] or block[:2000])
    return found
