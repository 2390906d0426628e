"""The robot's launch (robot_policy.launch.py, with all its arguments) plus sim_bridge_node playing the robot in a
twin, in real time (software in the loop).

ros2 launch edge sim_in_the_loop.launch.py artifact:=/opt/policy robot:=rover field_twin:=field.yaml namespace:=r1
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
            DeclareLaunchArgument("artifact", description="policy artifact directory"),
            DeclareLaunchArgument("robot", default_value="rover", description="robot name or YAML path"),
            DeclareLaunchArgument(
                "field_twin", default_value="", description="field robot YAML (hidden twin parameters, effects)"
            ),
            DeclareLaunchArgument("namespace", default_value="", description="robot namespace (all topics relative)"),
            Node(
                package="edge",
                executable="sim_bridge_node",
                namespace=LaunchConfiguration("namespace"),
                output="screen",
                parameters=[{"robot": LaunchConfiguration("robot"), "field_twin": LaunchConfiguration("field_twin")}],
            ),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(
                    PathJoinSubstitution([FindPackageShare("edge"), "launch", "robot_policy.launch.py"])
                ),
                # launch checks an include's required arguments against what it is given; the rest (backend,
                # namespace, record, instructions, ...) reach it as the command line set them
                launch_arguments={"artifact": LaunchConfiguration("artifact")}.items(),
            ),
        ]
    )
