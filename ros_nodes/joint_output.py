"""policy_node's output: joint targets as ros2_control takes them, std_msgs/Float64MultiArray on /joint_commands
(forward_command_controller) or trajectory_msgs/JointTrajectory on /joint_trajectory (joint_trajectory_controller)."""

from __future__ import annotations

import array

import numpy as np
from rclpy.lifecycle import LifecycleNode
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ros_nodes import qos

TOPICS = {
    "float64_array": (Float64MultiArray, "joint_commands"),
    "joint_trajectory": (JointTrajectory, "joint_trajectory"),
}
OUTPUT_TYPES = tuple(TOPICS)


class JointOutput:
    def __init__(self, node: LifecycleNode, output_type: str, joint_names: list[str]):
        msg_type, topic = TOPICS[output_type]
        self.publisher = node.create_lifecycle_publisher(msg_type, topic, qos.COMMAND)
        self.joint_names = joint_names
        self._msg = Float64MultiArray() if output_type == "float64_array" else None  # one message, refilled

    def publish(self, targets: np.ndarray) -> None:
        if self._msg is not None:
            data = array.array("d")  # taken as it is by the message (a list would be checked value by value)
            data.frombytes(np.ascontiguousarray(targets, dtype=np.float64).tobytes())
            self._msg.data = data
            self.publisher.publish(self._msg)
        else:
            traj = JointTrajectory(joint_names=self.joint_names)
            traj.points = [JointTrajectoryPoint(positions=[float(t) for t in targets])]
            self.publisher.publish(traj)
