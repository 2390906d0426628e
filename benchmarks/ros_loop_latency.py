"""Observation-in to command-out latency of policy_node over DDS, beside a minimal rclpy echo node (the
transport floor) measured in the same run, plus timer jitter and deadline misses at 50 Hz and 500 Hz, and how soon
the watchdog holds the safe pose once /joint_states stops (the rover at 50 Hz, stale after 2 periods) and how soon
an e-stop on ~/estop is announced on /safe_mode.

Each node runs in its own process, as on the robot. Latency: the probe publishes /imu/data and /odom, then
/joint_states (policy_node runs with trigger=joint_states) and times the /joint_commands that answers it. The
floor is an echo node that takes the same three messages and answers with a Float64MultiArray once all three are
in, doing nothing else; an echo of a single JointState is printed beside it for reference.

    python -m benchmarks.ros_loop_latency [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def echo_node(inputs: str) -> None:
    """The transport floor, on the executor policy_node uses (rclpy's EventsExecutor), with no work in between.
    inputs "one": a JointState in, a Float64MultiArray out. inputs "all": policy_node's three inputs of one instant
    (/imu/data, /odom, /joint_states, stamped alike) in, one Float64MultiArray out once all three are in: the same
    messages policy_node takes and sends, so the difference to it is policy_node's own cost."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.experimental import EventsExecutor
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Imu, JointState
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node("echo")
    pub = node.create_publisher(Float64MultiArray, "/echo_out", 10)
    if inputs == "one":
        node.create_subscription(
            JointState,
            "/echo_in",
            lambda m: pub.publish(Float64MultiArray(data=list(m.position))),
            qos_profile_sensor_data,
        )
    else:
        stamps = {}

        def received(topic, msg):
            stamps[topic] = msg.header.stamp.sec
            if len(stamps) == 3 and len(set(stamps.values())) == 1:
                pub.publish(Float64MultiArray(data=[0.0] * 12))

        for msg_type, topic in ((Imu, "/imu/data"), (Odometry, "/odom"), (JointState, "/joint_states")):
            node.create_subscription(msg_type, topic, lambda m, t=topic: received(t, m), qos_profile_sensor_data)
    executor = EventsExecutor()
    executor.add_node(node)
    try:
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass


def policy_diagnostics(node) -> dict[str, str]:
    """policy_node's latest /diagnostics key-values (ticks, deadline_misses, ...), kept up to date by `node`."""
    from diagnostic_msgs.msg import DiagnosticArray

    values: dict[str, str] = {}
    node.create_subscription(
        DiagnosticArray,
        "/diagnostics",
        lambda m: values.update({kv.key: kv.value for s in m.status if s.name == "policy_node" for kv in s.values}),
        10,
    )
    return values


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(2)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


class Probe:
    def __init__(self):
        import rclpy
        from nav_msgs.msg import Odometry
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import Bool, Float64MultiArray, String

        from ros_nodes import qos as node_qos

        self.rclpy, self.JointState, self.Imu, self.Odometry, self.Bool = rclpy, JointState, Imu, Odometry, Bool
        rclpy.init()
        self.node = rclpy.create_node("latency_probe")
        qos = qos_profile_sensor_data
        self.pub_js = self.node.create_publisher(JointState, "/joint_states", qos)
        self.pub_imu = self.node.create_publisher(Imu, "/imu/data", qos)
        self.pub_odom = self.node.create_publisher(Odometry, "/odom", qos)
        self.pub_echo = self.node.create_publisher(JointState, "/echo_in", qos)
        self.arrivals: list[float] = []
        self.commands: list[tuple[float, tuple[float, ...]]] = []  # /joint_commands: arrival, targets
        self.instant = 0
        self.diagnostics = policy_diagnostics(self.node)
        self.node.create_subscription(
            Float64MultiArray, "/echo_out", lambda m: self.arrivals.append(time.perf_counter()), 10
        )
        self.node.create_subscription(Float64MultiArray, "/joint_commands", self._on_command, 10)
        self.modes: list[tuple[float, str]] = []  # /safe_mode: arrival, mode
        self.node.create_subscription(
            String, "/safe_mode", lambda m: self.modes.append((time.perf_counter(), m.data)), node_qos.LATCHED
        )
        self.pub_estop = self.node.create_publisher(Bool, "/policy_node/estop", node_qos.LATCHED)
        self.executor = rclpy.executors.SingleThreadedExecutor()
        self.executor.add_node(self.node)

    def _on_command(self, msg) -> None:
        now = time.perf_counter()
        self.arrivals.append(now)
        self.commands.append((now, tuple(msg.data)))

    def sensors(self, joint_names: list[str], joint_states: bool = True) -> None:
        """One instant's inputs, stamped alike (policy_node's joint_states trigger waits for all three)."""
        self.instant += 1
        imu, odom = self.Imu(), self.Odometry()
        js = self.JointState(name=joint_names, position=[0.0] * len(joint_names), velocity=[0.0] * len(joint_names))
        imu.orientation.w = 1.0
        for msg in (imu, odom, js):
            msg.header.stamp.sec = self.instant
        self.pub_imu.publish(imu)
        self.pub_odom.publish(odom)
        if joint_states:
            self.pub_js.publish(js)

    def spin_for(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.executor.spin_once(timeout_sec=0.001)

    def round_trips(self, send, count: int, warmup: int = 50) -> np.ndarray:
        """Latency of `count` request/answer pairs, one at a time (ms)."""
        out = []
        for i in range(count + warmup):
            self.arrivals.clear()
            t0 = time.perf_counter()
            send()
            while not self.arrivals and time.perf_counter() - t0 < 0.5:
                self.executor.spin_once(timeout_sec=0.0005)
            if self.arrivals and i >= warmup:
                out.append((self.arrivals[0] - t0) * 1000)
            self.spin_for(0.002)  # let stragglers drain before the next one
        return np.array(out)

    def intervals(self, joint_names: list[str], seconds: float) -> np.ndarray:
        """Command inter-arrival times (ms) while sensors stream at 200 Hz."""
        self.arrivals.clear()
        end, next_send = time.perf_counter() + seconds, 0.0
        while time.perf_counter() < end:
            if time.perf_counter() >= next_send:
                self.sensors(joint_names)
                next_send = time.perf_counter() + 0.005
            self.executor.spin_once(timeout_sec=0.0005)
        return np.diff(np.array(self.arrivals)) * 1000

    def stream(self, joint_names: list[str], seconds: float, hz: float, joint_states: bool = True) -> float:
        """Sensors at `hz` for `seconds`; returns when the last /joint_states went out."""
        end, next_send, last_js = time.perf_counter() + seconds, 0.0, float("nan")
        while time.perf_counter() < end:
            if time.perf_counter() >= next_send:
                self.sensors(joint_names, joint_states)
                last_js = time.perf_counter() if joint_states else last_js
                next_send = time.perf_counter() + 1.0 / hz
            self.executor.spin_once(timeout_sec=0.0005)
        return last_js

    def watchdog_reactions(self, joint_names: list[str], hz: float, repeats: int) -> np.ndarray:
        """ms from the last /joint_states to the first safe (all-zero) command, once per stop of /joint_states.
        A stop with no safe command within 0.5 s gives NaN (not measured: the node never held)."""
        out = []
        for _ in range(repeats):
            last_js = self.stream(joint_names, 1.0, hz)  # healthy: the node leaves the safe pose
            self.commands.clear()
            self.stream(joint_names, 0.5, hz, joint_states=False)
            safe = [t for t, c in self.commands if t > last_js and not any(c)]
            out.append((safe[0] - last_js) * 1000 if safe else float("nan"))
        return np.array(out)

    def estop_reactions(self, joint_names: list[str], hz: float, repeats: int) -> np.ndarray:
        """ms from an e-stop published on ~/estop to the safe mode announced on /safe_mode (NaN: none within 1 s)."""
        out = []
        for _ in range(repeats):
            self.stream(joint_names, 0.5, hz)
            self.modes.clear()
            engaged = time.perf_counter()
            self.pub_estop.publish(self.Bool(data=True))
            self.stream(joint_names, 1.0, hz)
            held = [t for t, mode in self.modes if mode]
            out.append((held[0] - engaged) * 1000 if held else float("nan"))
            self.pub_estop.publish(self.Bool(data=False))
        self.stream(joint_names, 0.5, hz)
        return np.array(out)


def summary(ms: np.ndarray) -> tuple[float, float, int]:
    """p50 and max of the measured reactions (NaN: not measured), and how many were measured."""
    measured = ms[np.isfinite(ms)]
    if not len(measured):
        return float("nan"), float("nan"), 0
    return float(np.percentile(measured, 50)), float(measured.max()), len(measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--echo-node", choices=("one", "all"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_node:
        echo_node(args.echo_node)
        return
    os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 200 + 20))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    load = os.getloadavg()  # the figures are only as good as the machine is idle
    count = 300 if args.quick else 2000
    jitter_s = 2.0 if args.quick else 10.0

    from benchmarks.edge_policies import export_random_policy
    from edge.manifest import load_manifest

    with tempfile.TemporaryDirectory() as tmp:
        artifact = Path(tmp) / "policy"
        export_random_policy("quadruped", artifact)
        joints = list(load_manifest(artifact).joint_names)
        probe = Probe()
        untrusted = ["-p", "allow_unvalidated:=true", "-p", "allow_unsigned:=true"]  # random policies
        node = ["-m", "ros_nodes.policy_node", "--ros-args", *untrusted]
        node_args = [*node, "-p", f"artifact:={artifact}", "-p", "backend:=onnxruntime", "-p", "stale_periods:=100"]
        node_args += ["-p", "executor:=events"]  # the floor's executor; the timing runs below choose their own

        echo = start(["-m", "benchmarks.ros_loop_latency", "--echo-node", "one"])
        probe.spin_for(3.0)
        echo_one_ms = probe.round_trips(lambda: probe.pub_echo.publish(probe.JointState(position=[0.0] * 12)), count)
        stop(echo)
        echo = start(["-m", "benchmarks.ros_loop_latency", "--echo-node", "all"])
        probe.spin_for(3.0)
        echo_ms = probe.round_trips(lambda: probe.sensors(joints), count)
        stop(echo)

        policy = start([*node_args, "-p", "trigger:=joint_states"])
        probe.spin_for(6.0)
        policy_ms = probe.round_trips(lambda: probe.sensors(joints), count)
        stop(policy)

        # the watchdog at its defaults: the rover (its safe command is all zeros) at 50 Hz, stale after 2 periods
        rover = Path(tmp) / "rover"
        export_random_policy("rover", rover)
        rover_joints = list(load_manifest(rover).joint_names)
        watched = start([*node, "-p", f"artifact:={rover}"])
        probe.spin_for(6.0)
        reaction_ms = probe.watchdog_reactions(rover_joints, 50.0, 5 if args.quick else 30)
        estop_ms = probe.estop_reactions(rover_joints, 50.0, 5 if args.quick else 20)
        stop(watched)

        timing = {}
        # the executor policy_node runs (events) at both rates; rclpy's default one at 500 Hz for reference
        for hz, executor in ((50, "events"), (500, "events"), (500, "single")):
            timed = start([*node_args, "-p", f"rate_hz:={hz}.0", "-p", f"executor:={executor}"])
            probe.spin_for(6.0)
            probe.diagnostics.clear()
            gaps = probe.intervals(joints, jitter_s)
            probe.spin_for(1.2)  # one more /diagnostics, published each second
            stop(timed)
            period = 1000.0 / hz
            ticks, misses = int(probe.diagnostics.get("ticks", 0)), int(probe.diagnostics.get("deadline_misses", 0))
            timing[hz, executor] = {
                "jitter_ms": float(np.std(gaps)) if len(gaps) else float("nan"),
                "probe_miss_rate": float(np.mean(gaps > 1.5 * period)) if len(gaps) else float("nan"),
                "miss_rate": misses / ticks if ticks else float("nan"),
                "ticks": ticks,
            }

    paths = (
        ("echo_one", "echo, 1 message in", echo_one_ms),
        ("echo", "echo, 3 inputs in (floor)", echo_ms),
        ("policy", "policy_node (quadruped, ORT)", policy_ms),
    )
    p = {key: (np.percentile(v, 50), np.percentile(v, 99)) for key, _, v in paths}
    print(f"{'path':>28} {'p50 ms':>8} {'p99 ms':>8} {'n':>6}")
    for key, label, v in paths:
        print(f"{label:>28} {p[key][0]:>8.3f} {p[key][1]:>8.3f} {len(v):>6}")
    for (hz, executor), t in timing.items():
        print(
            f"timer {hz:>3} Hz, {executor:>6} executor: deadline misses (tick > 1.5 periods after the last, "
            f"node's count) {t['miss_rate']:.2%} of {t['ticks']} ticks; at the probe over DDS: "
            f"jitter {t['jitter_ms']:.3f} ms, gaps > 1.5 periods {t['probe_miss_rate']:.2%}"
        )
    watchdog, estop = summary(reaction_ms), summary(estop_ms)
    print(
        f"watchdog: safe pose {watchdog[0]:.1f} ms (p50), {watchdog[1]:.1f} ms (max) after the last /joint_states, "
        f"{watchdog[2]} of {len(reaction_ms)} stops held; target <= 3 periods + 10 ms = 70 ms (stale after 40 ms)"
    )
    print(
        f"e-stop: safe mode announced {estop[0]:.1f} ms (p50), {estop[1]:.1f} ms (max) after ~/estop, "
        f"{estop[2]} of {len(estop_ms)} engaged; target <= 1 period = 20 ms"
    )
    budget = 1.5 * p["echo"][1] + 0.5
    print(f"target: policy p99 <= 1.5 x echo p99 + 0.5 ms = {budget:.3f} ms; misses at 500 Hz < 1%")
    print(f"load average (1 min) before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(
        json.dumps(
            {
                "bench": "ros_loop_latency",
                "p50_ms": round(p["policy"][0], 4),
                "p99_ms": round(p["policy"][1], 4),
                "echo_p50_ms": round(p["echo"][0], 4),
                "echo_p99_ms": round(p["echo"][1], 4),
                "echo_one_message_p99_ms": round(p["echo_one"][1], 4),
                "ratio_p99_vs_echo": round(p["policy"][1] / p["echo"][1], 2),
                "miss_rate_50hz": round(timing[50, "events"]["miss_rate"], 4),
                "miss_rate_500hz": round(timing[500, "events"]["miss_rate"], 4),
                "miss_rate_500hz_single_executor": round(timing[500, "single"]["miss_rate"], 4),
                "jitter_500hz_ms": round(timing[500, "events"]["jitter_ms"], 4),
                "watchdog_p50_ms": round(watchdog[0], 2),
                "watchdog_max_ms": round(watchdog[1], 2),
                "watchdog_held": f"{watchdog[2]}/{len(reaction_ms)}",
                "estop_p50_ms": round(estop[0], 2),
                "estop_max_ms": round(estop[1], 2),
                "estop_engaged": f"{estop[2]}/{len(estop_ms)}",
                "baseline": "rclpy echo node, same 3 inputs",
                "load_avg_1m": round(load[0], 2),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
