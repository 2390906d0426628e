"""Two robots on one DDS domain, each in its own namespace with its bridge, policy_node and field_recorder: neither
hears the other's commands, and each recorder logs only its own robot's topics (all topic names are relative)."""

import subprocess
import sys
import time

from geometry_msgs.msg import Twist
from mcap.reader import make_reader
from nav_msgs.msg import Odometry

from ros_nodes import qos
from tests.campaign_helpers import export_rover_policy
from tests.ros_helpers import NodeProcess, probe_node, spin_until

ROBOTS = {"r1": (0.5, 0.0), "r2": (0.0, 1.0)}  # namespace -> the (vx, wz) its operator commands


def start(module: str, namespace: str, *params: str) -> NodeProcess:
    args = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:=/{namespace}"]
    for p in params:
        args += ["-p", p]
    return NodeProcess(args)


def _mean_twist(twists: list) -> Twist:
    mean = Twist()
    mean.linear.x = sum(t.linear.x for t in twists) / len(twists)
    mean.angular.z = sum(t.angular.z for t in twists) / len(twists)
    return mean


def test_two_robots_in_two_namespaces_do_not_cross_talk(tmp_path):
    artifact = export_rover_policy(tmp_path / "policy")
    procs = []
    try:
        for ns in ROBOTS:
            procs += [
                start("ros_nodes.sim_bridge_node", ns, "robot:=rover"),
                start(
                    "ros_nodes.policy_node",
                    ns,
                    f"artifact:={artifact}",
                    "allow_unvalidated:=true",
                    "allow_unsigned:=true",
                ),
                start("ros_nodes.field_recorder", ns, f"output_dir:={tmp_path / ns}"),
            ]
        with probe_node() as (node, ex):
            seen = {ns: [] for ns in ROBOTS}  # every odom twist (one message is noisy: the IMU noise of the twin)
            for ns in ROBOTS:
                node.create_subscription(
                    Odometry, f"/{ns}/odom", lambda m, ns=ns: seen[ns].append(m.twist.twist), qos.SENSOR
                )
            pubs = {ns: node.create_publisher(Twist, f"/{ns}/cmd_vel", qos.COMMAND) for ns in ROBOTS}
            assert spin_until(ex, lambda: all(seen.values()), 30), [p.output for p in procs]
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                for ns, (vx, wz) in ROBOTS.items():
                    msg = Twist()
                    msg.linear.x, msg.angular.z = vx, wz
                    pubs[ns].publish(msg)
                spin_until(ex, lambda: False, 0.05)
            # each robot did what its own operator said, and nothing of the other's (over its last ten odom messages)
            odom = {ns: _mean_twist(twists[-10:]) for ns, twists in seen.items()}
            assert odom["r1"].linear.x > 0.3 and abs(odom["r1"].angular.z) < 0.2, odom["r1"]
            assert odom["r2"].angular.z > 0.5 and abs(odom["r2"].linear.x) < 0.1, odom["r2"]
    finally:
        for p in procs:
            p.send_signal(2)  # SIGINT: the recorders finalise their segments
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    for ns in ROBOTS:
        topics = set()
        for mcap in (tmp_path / ns).glob("*/*.mcap"):
            with open(mcap, "rb") as f:
                topics |= {c.topic for c in make_reader(f).get_summary().channels.values()}
        assert {f"/{ns}/odom", f"/{ns}/cmd_vel", f"/{ns}/joint_commands"} <= topics, topics
        assert all(t.startswith(f"/{ns}/") for t in topics), topics  # only its own robot's
