"""On the robot: policy_node (plus field_recorder when record:=true).

    ros2 launch edge robot_policy.launch.py artifact:=/opt/policy backend:=tensorrt namespace:=go1 record:=true
"""

from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PARAMS = str(Path(__file__).resolve().parent.parent / "config" / "ros" / "robot.yaml")


def generate_launch_description() -> LaunchDescription:
    artifact, backend = LaunchConfiguration("artifact"), LaunchConfiguration("backend")
    namespace, record = LaunchConfiguration("namespace"), LaunchConfiguration("record")
    return LaunchDescription([
        DeclareLaunchArgument("artifact", description="policy artifact directory"),
        DeclareLaunchArgument("backend", default_value="auto", description="auto, tensorrt or onnxruntime"),
        DeclareLaunchArgument("namespace", default_value="", description="robot namespace"),
        DeclareLaunchArgument("record", default_value="true", description="record field logs to MCAP"),
        Node(package="edge", executable="policy_node", namespace=namespace,
             parameters=[PARAMS, {"artifact": artifact, "backend": backend}]),
        Node(package="edge", executable="field_recorder", namespace=namespace, parameters=[PARAMS],
             condition=IfCondition(record)),
    ])
