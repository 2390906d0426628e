"""sim_bridge_node's parameters: name, default, description, range and choices, in one place (`ros2 param describe`
shows them; sim_in_the_loop.launch.py and `sim2real sil` set them). `params.read` refuses a safe_mode outside its
choices as the node starts."""

from __future__ import annotations

from dataclasses import dataclass

from edge.manifest import SAFE_MODES
from ros_nodes.params import parameter


@dataclass(frozen=True)
class SimBridgeParams:
    robot: str = parameter("rover", "robot name or YAML path")
    field_twin: str = parameter("", "field robot YAML: hidden twin parameters and effects; '' = nominal")
    lockstep: bool = parameter(False, "own /clock and step when commands arrive")
    lockstep_timeout_s: float = parameter(
        1.0, "send a state again when no command answered it for this wall time", low=0.01, high=60.0
    )
    seed: int = parameter(0, "twin seed", low=0, high=2**31 - 1, integer=True)
    cmd_timeout_s: float = parameter(
        0.5, "real time: no joint_commands for this long applies the safe mode (ros2_control's)", low=0.01, high=60.0
    )
    safe_mode: str = parameter("", "hold or damp; '' = the robot YAML's", choices=("", *SAFE_MODES))
