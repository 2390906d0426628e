"""instruction_node's parameters: name, default, description, range and choices, in one place (`ros2 param
describe` shows them; the launch files and config/ros/robot.yaml set them). `params.read` refuses a backend outside
its choices, and a missing model or artifact, as the node starts."""

from __future__ import annotations

from dataclasses import dataclass

from edge.errors import ConfigError
from edge.providers import BACKENDS
from ros_nodes.params import allow_unsigned_parameter, parameter, trusted_keys_parameter


@dataclass(frozen=True)
class InstructionParams:
    model: str = parameter(
        "",
        "exported instruction model directory (training.rlhf.export_onnx: model.onnx, tokenizer.json, "
        "manifest.json); required",
    )
    backend: str = parameter(
        "auto", f"ONNX Runtime providers: {', '.join(BACKENDS)} (auto: CUDA where present, else CPU)", choices=BACKENDS
    )
    threads: int = parameter(
        1,
        "ONNX Runtime intra-op threads (0: one per core); the small model plans fastest on one",
        low=0,
        high=64,
        integer=True,
    )
    artifact: str = parameter("", "policy artifact directory; its manifest's command limits clamp plans; required")
    max_duration_s: float = parameter(30.0, "longest plan executed (s)", low=0.1, high=600.0)
    rate_hz: float = parameter(
        20.0,
        "/cmd_vel publish rate while a plan runs (policy_node treats /cmd_vel older than its cmd_timeout_s as stop)",
        low=1.0,
        high=200.0,
    )
    constrained: bool = parameter(True, "grammar-constrained decoding (plans always parse)")
    trusted_keys: str = trusted_keys_parameter("the model and the artifact")
    allow_unsigned: bool = allow_unsigned_parameter("model or artifact")
    modules_file: str = parameter("", "debug: at exit, write the names of the process's imported modules here (JSON)")

    def __post_init__(self) -> None:
        for name, what in (("model", "exported instruction model"), ("artifact", "policy")):
            if not getattr(self, name):
                raise ConfigError(f"parameter '{name}' ({what} directory) is required")
