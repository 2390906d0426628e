"""sim_bridge_node in lockstep, over real DDS: simulated time moves one control period per command and never without
one (a state nobody answered is sent again), so a policy's commands never slip a step behind its states."""

from rclpy.qos import qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from tests.ros_helpers import node_process, probe_node, spin_until

NS = 20_000_000  # the rover's control period


def test_lockstep_steps_once_per_command_and_resends_unanswered_states():
    with (
        node_process("ros_nodes.sim_bridge_node", "lockstep:=true", "lockstep_timeout_s:=0.3") as proc,
        probe_node() as (node, ex),
    ):
        stamps, clock = [], []
        node.create_subscription(
            JointState,
            "/joint_states",
            lambda m: stamps.append(m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec),
            qos_profile_sensor_data,
        )
        node.create_subscription(
            Clock, "/clock", lambda m: clock.append(m.clock.sec * 1_000_000_000 + m.clock.nanosec), 10
        )
        pub = node.create_publisher(Float64MultiArray, "/joint_commands", 10)
        assert spin_until(ex, lambda: len(stamps) >= 3, 30), proc.output  # resent every 0.3 s
        assert set(stamps) == {0} and set(clock) <= {0}  # no command, no time

        for k in range(1, 4):  # answer each state once: one step each
            pub.publish(Float64MultiArray(data=[1.0, 1.0]))
            assert spin_until(ex, lambda k=k: stamps[-1] == k * NS, 5), (k, stamps[-5:])
        pub.publish(Float64MultiArray(data=[1.0]))  # wrong size: ignored, no step
        spin_until(ex, lambda: False, 1.0)
        assert max(stamps) == 3 * NS and stamps[-1] == 3 * NS  # the last state, sent again
        assert max(clock) == 3 * NS
        assert "ignored /joint_commands" in proc.output and "sending the state again" in proc.output
