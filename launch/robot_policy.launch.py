"""On the robot: policy_node (a managed node, configured and activated by launch_ros), plus field_recorder when
record:=true and instruction_node when instructions:=true.

ros2 launch edge robot_policy.launch.py artifact:=/opt/policy backend:=tensorrt namespace:=go1 record:=true
ros2 launch edge robot_policy.launch.py artifact:=/opt/policy instructions:=true instruction_model:=/opt/instruct
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode, Node
from launch_ros.substitutions import FindPackageShare

PARAMS = PathJoinSubstitution([FindPackageShare("edge"), "config", "ros", "robot.yaml"])


def generate_launch_description() -> LaunchDescription:
    artifact, backend = LaunchConfiguration("artifact"), LaunchConfiguration("backend")
    namespace, record = LaunchConfiguration("namespace"), LaunchConfiguration("record")
    instructions, instruction_model = LaunchConfiguration("instructions"), LaunchConfiguration("instruction_model")
    return LaunchDescription(
        [
            DeclareLaunchArgument("artifact", description="policy artifact directory"),
            DeclareLaunchArgument("backend", default_value="auto", description="auto, tensorrt or onnxruntime"),
            DeclareLaunchArgument("namespace", default_value="", description="robot namespace (all topics relative)"),
            DeclareLaunchArgument("record", default_value="true", description="record field logs to MCAP"),
            DeclareLaunchArgument("instructions", default_value="false", description="run instruction_node"),
            DeclareLaunchArgument("instruction_model", default_value="", description="exported instruction model"),
            LifecycleNode(
                package="edge",
                executable="policy_node",
                name="policy_node",
                namespace=namespace,
                # launch_ros drives the lifecycle (configure, then activate); the node's own autostart stays off
                parameters=[PARAMS, {"artifact": artifact, "backend": backend, "autostart": False}],
                autostart=True,
            ),
            Node(
                package="edge",
                executable="field_recorder",
                namespace=namespace,
                parameters=[PARAMS],
                condition=IfCondition(record),
            ),
            Node(
                package="edge",
                executable="instruction_node",
                namespace=namespace,
                parameters=[PARAMS, {"model": instruction_model, "artifact": artifact}],
                condition=IfCondition(instructions),
            ),
        ]
    )
