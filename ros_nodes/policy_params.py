"""policy_node's parameters: name, default, description and range, in one place (`ros2 param describe` shows them;
the launch files and config/ros/robot.yaml set them)."""

from __future__ import annotations

from dataclasses import dataclass

from edge.manifest import SAFE_MODES
from edge.runtime import BACKENDS
from ros_nodes.joint_output import OUTPUT_TYPES
from ros_nodes.params import parameter

TRIGGERS = ("timer", "joint_states")


@dataclass(frozen=True)
class PolicyParams:
    artifact: str = parameter("", "policy artifact directory (policy.onnx + manifest.json)")
    backend: str = parameter("auto", f"inference backend: {', '.join(BACKENDS)}")
    rate_hz: float = parameter(0.0, "control rate override; 0 = the manifest's", low=0, high=2000)
    stale_periods: int = parameter(
        2, "inputs older than this many control periods are stale", low=1, high=100, integer=True
    )
    cmd_timeout_s: float = parameter(0.5, "/cmd_vel older than this means stop (zero command)", low=0.01, high=60.0)
    max_vx: float = parameter(0.0, "|vx| command limit (m/s); 0 = the manifest's", low=0, high=10)
    max_vy: float = parameter(0.0, "|vy| command limit (m/s); 0 = the manifest's", low=0, high=10)
    max_wz: float = parameter(0.0, "|wz| command limit (rad/s); 0 = the manifest's", low=0, high=20)
    output_type: str = parameter("float64_array", "float64_array (forward_command_controller) or joint_trajectory")
    allow_unvalidated: bool = parameter(False, "run an artifact without a passing campaign verdict (development only)")
    trusted_keys: str = parameter(
        "/etc/sim2real/trusted_keys",
        "comma-separated public keys (PEM files, or directories of *.pub) artifacts are verified against",
    )
    allow_unsigned: bool = parameter(
        False, "run an unsigned or wrongly signed artifact, with a WARN (development only)"
    )
    safe_mode: str = parameter("", "on a fault or an e-stop: hold or damp; '' = the manifest's (the robot YAML's)")
    trigger: str = parameter(
        "timer",
        "timer: tick at the control rate; joint_states: tick once per /joint_states, when the other inputs of that "
        "instant are in (the driver sets the rate; the timer then only watches for silence)",
    )
    autostart: bool = parameter(True, "configure and activate at start-up")
    executor: str = parameter(
        "events",
        "events: rclpy's EventsExecutor (C++ event queue, a fraction of the per-callback cost); "
        "single: SingleThreadedExecutor",
    )

    def problem(self) -> str | None:
        """What configure refuses (None: nothing)."""
        if self.backend not in BACKENDS:
            return f"backend {self.backend!r}: use {', '.join(BACKENDS)}"
        if self.output_type not in OUTPUT_TYPES:
            return f"output_type {self.output_type!r}: use {' or '.join(OUTPUT_TYPES)}"
        if self.safe_mode not in ("", *SAFE_MODES):
            return f"safe_mode {self.safe_mode!r}: use {' or '.join(SAFE_MODES)} (or '' for the manifest's)"
        if self.trigger not in TRIGGERS:
            return f"trigger {self.trigger!r}: use {' or '.join(TRIGGERS)}"
        return None
