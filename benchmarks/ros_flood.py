"""Flood and soak on loopback: policy_node at 50 Hz and instruction_node while another process floods /cmd_vel at
5 kHz and /instruction at 100/s, beside the same nodes measured quiet in the same run (the anchor).

Each node runs in its own process, as on the robot; the probe streams the sensors at 200 Hz and reads
policy_node's /diagnostics (ticks and deadline misses, its own count: a tick more than 1.5 periods after the one
before) and instruction_node's ~/plan (the plan that runs and the count of instructions dropped). Memory is each
node's resident set, sampled every second; growth is the flood's last sample less its first after a warm-up.

Targets (issue "Faults and hostile input"): deadline misses < 1% at 50 Hz under the flood, flat memory, and a
bounded instruction queue: the newest instruction wins, the dropped ones are counted.

    python -m benchmarks.ros_flood [--quick] [--seconds 60] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

INSTRUCTIONS = ("go forward 1 m", "turn left 90 degrees", "drive backwards slowly for 2 seconds", "spin right")
WARMUP_S = 5.0  # flood time before the first memory sample: allocator and DDS caches settle


def flooder(cmd_hz: float, instruction_hz: float, seconds: float) -> None:
    """The flood: /cmd_vel and /instruction at their rates for `seconds`; prints what it sent as JSON."""
    import rclpy
    from geometry_msgs.msg import Twist
    from std_msgs.msg import String

    from ros_nodes import qos

    rclpy.init()
    node = rclpy.create_node("flooder")
    cmd = node.create_publisher(Twist, "/cmd_vel", qos.COMMAND)
    instruction = node.create_publisher(String, "/instruction", qos.COMMAND)
    time.sleep(2.0)  # discovery
    sent = {"cmd_vel": 0, "instruction": 0}
    t0 = time.perf_counter()
    next_cmd = next_instruction = t0
    msg = Twist()
    while (now := time.perf_counter()) - t0 < seconds:
        if now >= next_cmd:
            msg.linear.x = 0.5 if sent["cmd_vel"] % 2 else -0.5
            cmd.publish(msg)
            sent["cmd_vel"] += 1
            next_cmd += 1.0 / cmd_hz
        if now >= next_instruction:
            text = f"{INSTRUCTIONS[sent['instruction'] % len(INSTRUCTIONS)]} #{sent['instruction']}"
            instruction.publish(String(data=text))
            sent["instruction"] += 1
            next_instruction += 1.0 / instruction_hz
        wait = min(next_cmd, next_instruction) - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
    sent["seconds"] = time.perf_counter() - t0
    print(json.dumps(sent), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Probe:
    """Streams the sensors of policy_node's inputs and listens to its /diagnostics and instruction_node's plans."""

    def __init__(self, joint_names: list[str]):
        import rclpy
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import String

        from benchmarks.ros_loop_latency import policy_diagnostics
        from ros_nodes import qos

        self.rclpy = rclpy
        rclpy.init()
        self.node = rclpy.create_node("flood_probe")
        self.joints = joint_names
        self.imu, self.odom = Imu(), Odometry()
        self.imu.orientation.w = 1.0
        self.js = JointState(name=joint_names, position=[0.0] * len(joint_names), velocity=[0.0] * len(joint_names))
        self.pubs = [
            self.node.create_publisher(type(m), t, qos.SENSOR)
            for m, t in ((self.imu, "/imu/data"), (self.odom, "/odom"), (self.js, "/joint_states"))
        ]
        self.diagnostics = policy_diagnostics(self.node)
        self.plans: list[dict] = []
        self.node.create_subscription(
            String, "/instruction_node/plan", lambda m: self.plans.append(json.loads(m.data)), qos.LATCHED
        )
        self.executor = rclpy.executors.SingleThreadedExecutor()
        self.executor.add_node(self.node)

    def run(self, seconds: float, every_second=None, until=None) -> None:
        """Sensors at 200 Hz, stamped with the clock, for `seconds` (or until `until()`); `every_second()` once a
        second."""
        end, next_send, next_sample = time.perf_counter() + seconds, 0.0, time.perf_counter() + 1.0
        while (now := time.perf_counter()) < end and not (until is not None and until()):
            if now >= next_send:
                stamp = self.node.get_clock().now().to_msg()
                for pub, msg in zip(self.pubs, (self.imu, self.odom, self.js), strict=True):
                    msg.header.stamp = stamp
                    pub.publish(msg)
                next_send = now + 0.005
            if every_second is not None and now >= next_sample:
                every_second()
                next_sample += 1.0
            self.executor.spin_once(timeout_sec=0.001)

    def counters(self) -> tuple[int, int]:
        return int(self.diagnostics.get("ticks", 0)), int(self.diagnostics.get("deadline_misses", 0))

    def close(self) -> None:
        self.node.destroy_node()
        self.rclpy.try_shutdown()


@dataclass
class FloodResult:
    seconds: float
    cmd_vel_sent: int
    instructions_sent: int
    miss_rate_quiet: float  # the anchor: the same node, same rate, no flood
    miss_rate_50hz: float
    ticks_flood: int
    tick_rate_hz: float  # ticks per second of the flood window: 50 when no period is lost
    memory_growth_mb: float  # policy_node
    memory_mb: float
    instruction_memory_growth_mb: float
    instruction_memory_mb: float
    plans: int
    instructions_dropped: int
    newest_plan_lag: int  # instructions sent after the one the last plan answered (0: it was the newest)
    nodes_alive: bool


def _start(module: str, params: dict[str, str], log: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", module, "--ros-args"]
    for k, v in params.items():
        args += ["-p", f"{k}:={v}"]
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(2)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_flood(
    seconds: float,
    model: str | Path,
    quiet_s: float = 10.0,
    cmd_hz: float = 5000.0,
    instruction_hz: float = 100.0,
    warmup_s: float = WARMUP_S,
) -> FloodResult:
    """Quiet phase (the anchor), then the flood, on a random quadruped policy at 50 Hz and `model`."""
    from benchmarks.edge_policies import export_random_policy
    from edge.manifest import load_manifest

    os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 200 + 20))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        artifact = tmp / "policy"
        export_random_policy("quadruped", artifact)
        dev = {"allow_unsigned": "true"}  # what is measured is load, not trust (tests/test_signing.py has that)
        policy = _start(
            "ros_nodes.policy_node",
            {
                "artifact": str(artifact),
                "backend": "onnxruntime",
                "rate_hz": "50.0",
                "allow_unvalidated": "true",
                **dev,
            },
            tmp / "policy_node.log",
        )
        instruct = _start(
            "ros_nodes.instruction_node", {"model": str(model), "artifact": str(artifact), **dev}, tmp / "instruct.log"
        )
        probe = Probe(list(load_manifest(artifact).joint_names))
        try:

            def ready() -> bool:  # policy_node ticking, instruction_node's model loaded
                return probe.counters()[0] > 0 and "ready" in (tmp / "instruct.log").read_text()

            probe.run(30.0, until=ready)
            probe.run(1.0)
            ticks0, misses0 = probe.counters()
            probe.run(quiet_s)
            ticks1, misses1 = probe.counters()
            flood = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.ros_flood", "--flooder", str(cmd_hz), str(instruction_hz)]
                + [str(seconds)],
                stdout=subprocess.PIPE,
                text=True,
            )
            probe.run(2.0 + warmup_s)  # the flooder's discovery, then the warm-up
            ticks2, misses2 = probe.counters()
            window_start = time.perf_counter()
            rss: dict[str, list[float]] = {"policy": [], "instruct": []}

            def sample() -> None:
                for name, proc in (("policy", policy), ("instruct", instruct)):
                    if proc.poll() is None:
                        rss[name].append(rss_mb(proc.pid))

            sample()
            probe.run(max(seconds - warmup_s, 1.0), every_second=sample)
            sent = json.loads(flood.communicate(timeout=60)[0].strip().splitlines()[-1])
            probe.run(2.0)  # the last /diagnostics and plans
            ticks3, misses3 = probe.counters()
            window = time.perf_counter() - window_start
            alive = policy.poll() is None and instruct.poll() is None
        finally:
            probe.close()
            _stop(policy)
            _stop(instruct)
    flood_ticks = ticks3 - ticks2
    last = probe.plans[-1] if probe.plans else {}
    number = last.get("instruction", "").rpartition("#")[2]
    return FloodResult(
        seconds=sent["seconds"],
        cmd_vel_sent=sent["cmd_vel"],
        instructions_sent=sent["instruction"],
        miss_rate_quiet=(misses1 - misses0) / max(ticks1 - ticks0, 1),
        miss_rate_50hz=(misses3 - misses2) / max(flood_ticks, 1),
        ticks_flood=flood_ticks,
        tick_rate_hz=flood_ticks / window,
        memory_growth_mb=rss["policy"][-1] - rss["policy"][0] if rss["policy"] else float("nan"),
        memory_mb=rss["policy"][-1] if rss["policy"] else float("nan"),
        instruction_memory_growth_mb=rss["instruct"][-1] - rss["instruct"][0] if rss["instruct"] else float("nan"),
        instruction_memory_mb=rss["instruct"][-1] if rss["instruct"] else float("nan"),
        plans=len(probe.plans),
        instructions_dropped=int(last.get("instructions_dropped", 0)),
        newest_plan_lag=sent["instruction"] - 1 - int(number) if number.isdigit() else -1,
        nodes_alive=alive,
    )


def default_model() -> Path:
    """The tests' small trained instruction model, exported (built once, then cached: tests/rlhf_helpers.py)."""
    from tests.rlhf_helpers import minimal_run

    return Path(minimal_run()["onnx_dir"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 15 s flood")
    parser.add_argument("--seconds", type=float, default=60.0, help="flood duration (default %(default)s)")
    parser.add_argument("--model", help="exported instruction model (default: the tests' small one)")
    parser.add_argument("--flooder", nargs=3, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flooder:
        flooder(*args.flooder)
        return
    load = os.getloadavg()
    seconds = 15.0 if args.quick else args.seconds
    r = run_flood(seconds, args.model or default_model())
    print(f"flood: {r.cmd_vel_sent / r.seconds:.0f} /cmd_vel per s, {r.instructions_sent / r.seconds:.0f} /instruction")
    print(f"       per s for {r.seconds:.1f} s ({r.cmd_vel_sent} and {r.instructions_sent} messages)")
    print(
        f"policy_node at 50 Hz: deadline misses {r.miss_rate_50hz:.2%} of {r.ticks_flood} ticks under the flood "
        f"(quiet: {r.miss_rate_quiet:.2%}); RSS {r.memory_mb:.1f} MB, growth {r.memory_growth_mb:+.2f} MB"
    )
    print(
        f"instruction_node: {r.plans} plans, {r.instructions_dropped} instructions dropped (newest wins), last plan "
        f"{r.newest_plan_lag} behind the newest; RSS {r.instruction_memory_mb:.1f} MB, growth "
        f"{r.instruction_memory_growth_mb:+.2f} MB; nodes alive: {r.nodes_alive}"
    )
    print("target: misses < 1% at 50 Hz, flat memory, a bounded instruction queue")
    print(f"load average (1 min) before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        json.dumps(
            {
                "bench": "ros_flood",
                **{k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(r).items()},
                "baseline": "the same nodes, quiet (no flood), same run",
                "miss_rate_vs_quiet": round(r.miss_rate_50hz - r.miss_rate_quiet, 4),
                "load_avg_1m": round(load[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
