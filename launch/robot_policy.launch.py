"""On the robot: policy_node (a managed node: launch configures it, then activates it), plus field_recorder when
record:=true and instruction_node when instructions:=true.

ros2 launch edge robot_policy.launch.py artifact:=/opt/policy backend:=tensorrt namespace:=go1 record:=true
ros2 launch edge robot_policy.launch.py artifact:=/opt/policy instructions:=true instruction_model:=/opt/instruct

The lifecycle is driven by launch's own events (configure at start, activate once configured), which every Jazzy
has (LifecycleNode's autostart needs launch_ros >= 0.26.7). A configure that fails, or a node that exits with an
error, ends the launch with a non-zero exit: the node's own ERROR line says why.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import LifecycleNode, Node
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.substitutions import FindPackageShare
from lifecycle_msgs.msg import Transition


def change_state(node: LifecycleNode, transition: int) -> EmitEvent:
    return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition))


def stop(why: str):
    def fail(*_):  # launch logs the exception as one ERROR line, shuts every node down and exits 1
        raise RuntimeError(why)

    return fail


def node_failed(event, context):
    if event.returncode != 0 and not context.is_shutdown:  # not the exit of a node that launch itself stopped
        stop(f"{event.process_name} exited with code {event.returncode} (its last lines are above)")()


def generate_launch_description() -> LaunchDescription:
    artifact, params_file = LaunchConfiguration("artifact"), LaunchConfiguration("params_file")
    namespace, instruction_model = LaunchConfiguration("namespace"), LaunchConfiguration("instruction_model")
    policy = LifecycleNode(
        package="edge",
        executable="policy_node",
        name="policy_node",
        namespace=namespace,
        output="screen",
        # launch drives the lifecycle below; the node's own start-up transitions stay off
        parameters=[params_file, {"artifact": artifact, "backend": LaunchConfiguration("backend"), "autostart": False}],
    )
    return LaunchDescription(
        [
            DeclareLaunchArgument("artifact", description="policy artifact directory"),
            DeclareLaunchArgument("backend", default_value="auto", description="auto, tensorrt or onnxruntime"),
            DeclareLaunchArgument("namespace", default_value="", description="robot namespace (all topics relative)"),
            DeclareLaunchArgument("record", default_value="true", description="record field logs to MCAP"),
            DeclareLaunchArgument("instructions", default_value="false", description="run instruction_node"),
            DeclareLaunchArgument("instruction_model", default_value="", description="exported instruction model"),
            DeclareLaunchArgument(
                "params_file",
                default_value=PathJoinSubstitution([FindPackageShare("edge"), "config", "ros", "robot.yaml"]),
                description="the nodes' parameter file (trusted keys, recorder directory, ...)",
            ),
            RegisterEventHandler(OnProcessExit(on_exit=node_failed)),
            RegisterEventHandler(
                OnStateTransition(
                    target_lifecycle_node=policy,
                    start_state="configuring",
                    goal_state="inactive",
                    entities=[change_state(policy, Transition.TRANSITION_ACTIVATE)],
                )
            ),
            RegisterEventHandler(
                OnStateTransition(
                    target_lifecycle_node=policy,
                    start_state="configuring",
                    goal_state="unconfigured",
                    entities=[OpaqueFunction(function=stop("policy_node did not configure (its ERROR line is above)"))],
                )
            ),
            policy,
            change_state(policy, Transition.TRANSITION_CONFIGURE),
            Node(
                package="edge",
                executable="field_recorder",
                namespace=namespace,
                output="screen",
                parameters=[params_file],
                condition=IfCondition(LaunchConfiguration("record")),
            ),
            Node(
                package="edge",
                executable="instruction_node",
                namespace=namespace,
                output="screen",
                parameters=[params_file, {"model": instruction_model, "artifact": artifact}],
                condition=IfCondition(LaunchConfiguration("instructions")),
            ),
        ]
    )
