"""Parameter descriptors for the nodes: a description, and a range where the value has one (ros2 param describe
shows both; rclpy refuses a value outside the range)."""

from __future__ import annotations

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor


def describe(
    text: str, *, low: float | None = None, high: float | None = None, integer: bool = False
) -> ParameterDescriptor:
    d = ParameterDescriptor(description=text)
    if low is not None and integer:
        d.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
    elif low is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
    return d
