"""The robot's launch plus sim_bridge_node playing the robot in a twin (software in the loop).

ros2 launch edge sim_in_the_loop.launch.py artifact:=policy robot:=rover field_twin:=field.yaml
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument("robot", default_value="rover", description="robot name or YAML path"),
            DeclareLaunchArgument("field_twin", default_value="", description="YAML of hidden twin parameters"),
            DeclareLaunchArgument("namespace", default_value="", description="robot namespace (all topics relative)"),
            Node(
                package="edge",
                executable="sim_bridge_node",
                namespace=LaunchConfiguration("namespace"),
                parameters=[{"robot": LaunchConfiguration("robot"), "field_twin": LaunchConfiguration("field_twin")}],
            ),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(
                    PathJoinSubstitution([FindPackageShare("edge"), "launch", "robot_policy.launch.py"])
                )
            ),
        ]
    )
