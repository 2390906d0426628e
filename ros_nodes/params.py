"""Parameter descriptors for the nodes: a description, and a range where the value has one (ros2 param describe
shows both; rclpy refuses a value outside the range). A node's parameters can also be one dataclass of `parameter`
fields (as generate_parameter_library gives ros2_controllers a struct): `declare` and `read` then take the class."""

from __future__ import annotations

from dataclasses import field, fields
from typing import Any, TypeVar

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node

T = TypeVar("T")


def describe(
    text: str, *, low: float | None = None, high: float | None = None, integer: bool = False
) -> ParameterDescriptor:
    d = ParameterDescriptor(description=text)
    if low is not None and integer:
        d.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
    elif low is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
    return d


def parameter(default: Any, text: str, **ranges: Any) -> Any:
    """A dataclass field that is a node parameter: its default, and its descriptor (`describe(text, **ranges)`)."""
    return field(default=default, metadata={"descriptor": describe(text, **ranges)})


def declare(node: Node, params: type) -> None:
    node.declare_parameters("", [(f.name, f.default, f.metadata["descriptor"]) for f in fields(params)])


def read(node: Node, params: type[T]) -> T:
    return params(**{f.name: node.get_parameter(f.name).value for f in fields(params)})
