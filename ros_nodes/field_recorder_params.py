"""field_recorder's parameters: name, default, description and range, in one place (`ros2 param describe` shows
them; the launch files and config/ros/robot.yaml set them)."""

from __future__ import annotations

from dataclasses import dataclass

from ros_nodes.params import parameter

# relative names: under a namespace (two robots on one DDS domain) each recorder logs only its own robot's topics
DEFAULT_TOPICS = (
    "joint_states",
    "imu/data",
    "odom",
    "foot_forces",
    "cmd_vel",
    "instruction",
    "joint_commands",
    "safe_mode",
    "diagnostics",
)


@dataclass(frozen=True)
class FieldRecorderParams:
    topics: tuple[str, ...] = parameter(DEFAULT_TOPICS, "topics to record")
    output_dir: str = parameter("field_logs", "directory for segments")
    segment_s: float = parameter(60.0, "rotate after this many seconds", low=1.0, high=86400.0)
    segment_mb: float = parameter(256.0, "rotate after this many MB", low=1.0, high=1e6)
