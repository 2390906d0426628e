"""policy_node's parameters: name, default, description, range and choices, in one place (`ros2 param describe`
shows them; the launch files and config/ros/robot.yaml set them). `params.read` refuses a value outside the choices
at configure."""

from __future__ import annotations

import math
from dataclasses import dataclass

from edge.errors import ConfigError
from edge.manifest import SAFE_MODES
from edge.runtime import BACKENDS
from ros_nodes.joint_output import OUTPUT_TYPES
from ros_nodes.params import allow_unsigned_parameter, parameter, trusted_keys_parameter
from ros_nodes.spin import EXECUTORS

TRIGGERS = ("timer", "joint_states")


@dataclass(frozen=True)
class PolicyParams:
    artifact: str = parameter("", "policy artifact directory (policy.onnx + manifest.json)")
    backend: str = parameter("auto", f"inference backend: {', '.join(BACKENDS)}", choices=BACKENDS)
    rate_hz: float = parameter(0.0, "control rate override; 0 = the manifest's", low=0, high=2000)
    stale_periods: int = parameter(
        2, "inputs older than this many control periods are stale", low=1, high=100, integer=True
    )
    cmd_timeout_s: float = parameter(0.5, "/cmd_vel older than this means stop (zero command)", low=0.01, high=60.0)
    max_vx: float = parameter(0.0, "|vx| command limit (m/s); 0 = the manifest's", low=0, high=10)
    max_vy: float = parameter(0.0, "|vy| command limit (m/s); 0 = the manifest's", low=0, high=10)
    max_wz: float = parameter(0.0, "|wz| command limit (rad/s); 0 = the manifest's", low=0, high=20)
    output_type: str = parameter(
        "float64_array", "float64_array (forward_command_controller) or joint_trajectory", choices=OUTPUT_TYPES
    )
    allow_unvalidated: bool = parameter(False, "run an artifact without a passing campaign verdict (development only)")
    trusted_keys: str = trusted_keys_parameter("the artifact")
    allow_unsigned: bool = allow_unsigned_parameter("artifact")
    safe_mode: str = parameter(
        "", "on a fault or an e-stop: hold or damp; '' = the manifest's (the robot YAML's)", choices=("", *SAFE_MODES)
    )
    trigger: str = parameter(
        "timer",
        "timer: tick at the control rate; joint_states: tick once per /joint_states, when the other inputs of that "
        "instant are in (the driver sets the rate; the timer then only watches for silence)",
        choices=TRIGGERS,
    )
    gyro_bias: tuple[float, ...] = parameter(
        (0.0, 0.0, 0.0),
        "the IMU's angular-velocity bias (x, y, z, rad/s), taken off every /imu/data reading: a calibration, e.g. the "
        "one `sim2real retrain` identifies against the odometry (calibration.yaml in its directory)",
    )
    autostart: bool = parameter(True, "configure and activate at start-up")
    executor: str = parameter(
        "single",
        "single: SingleThreadedExecutor; events: rclpy's experimental EventsExecutor (C++ event queue, a fraction "
        "of the per-callback cost; it once ended the node on an e-stop service call, docs/ros.md)",
        choices=EXECUTORS,
    )

    def __post_init__(self) -> None:
        if len(self.gyro_bias) != 3 or not all(math.isfinite(b) for b in self.gyro_bias):
            raise ConfigError(f"gyro_bias {list(self.gyro_bias)} must be three finite numbers (x, y, z, rad/s)")
