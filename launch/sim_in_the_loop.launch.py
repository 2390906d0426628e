"""The robot's launch plus sim_bridge_node playing the robot in a twin (software in the loop).

ros2 launch edge sim_in_the_loop.launch.py artifact:=policy robot:=rover field_twin:=field.yaml
"""

from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

HERE = Path(__file__).resolve().parent


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument("robot", default_value="rover", description="robot name or YAML path"),
            DeclareLaunchArgument("field_twin", default_value="", description="YAML of hidden twin parameters"),
            Node(
                package="edge",
                executable="sim_bridge_node",
                parameters=[{"robot": LaunchConfiguration("robot"), "field_twin": LaunchConfiguration("field_twin")}],
            ),
            IncludeLaunchDescription(PythonLaunchDescriptionSource(str(HERE / "robot_policy.launch.py"))),
        ]
    )
