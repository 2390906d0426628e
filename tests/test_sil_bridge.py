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


def test_a_state_sent_again_carries_the_same_sensor_noise():
    """The hard field rover's gyro and odometry noise is drawn once per instant: a state sent again (while the nodes
    connect, or under load) is the same messages. Drawn anew, a run's noise depended on how often the bridge had to
    resend, so one policy's field KPIs moved from session to session."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import Imu

    from sim2real.loop.config import field_twin_for

    twin = field_twin_for("rover")
    with (
        node_process(
            "ros_nodes.sim_bridge_node", "lockstep:=true", "lockstep_timeout_s:=0.2", f"field_twin:={twin}"
        ) as proc,
        probe_node() as (node, ex),
    ):
        sensed = []  # (topic, stamp, yaw rate as sensed)

        def on(topic, yaw_rate):
            return lambda m: sensed.append(
                (topic, m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec, yaw_rate(m))
            )

        node.create_subscription(Imu, "/imu/data", on("gyro", lambda m: m.angular_velocity.z), qos_profile_sensor_data)
        node.create_subscription(
            Odometry, "/odom", on("odom", lambda m: m.twist.twist.angular.z), qos_profile_sensor_data
        )
        pub = node.create_publisher(Float64MultiArray, "/joint_commands", 10)

        def sent(stamp):
            return [(topic, yaw) for topic, s, yaw in sensed if s == stamp and topic == "odom"]

        assert spin_until(ex, lambda: len(sent(0)) >= 3, 30), proc.output  # state 0, sent again every 0.2 s
        pub.publish(Float64MultiArray(data=[0.0, 0.0]))
        assert spin_until(ex, lambda: len(sent(NS)) >= 3, 10), proc.output
    readings = {(topic, s): {yaw for t, s2, yaw in sensed if t == topic and s2 == s} for topic, s, _ in sensed}
    assert all(len(values) == 1 for values in readings.values()), readings  # each instant: one reading, resent
    # and there is noise to keep: the robot stands still, yet its two instants read differently
    assert readings[("gyro", 0)] != readings[("gyro", NS)] and readings[("odom", 0)] != readings[("odom", NS)]
