"""Parameter descriptors for the nodes: a description, a range where the value has one, and the choices where it
takes one of a fixed set (ros2 param describe shows all three; rclpy refuses a value outside the range, and these
helpers one outside the choices). Each node's parameters are one frozen dataclass of `parameter` fields (as
generate_parameter_library gives ros2_controllers a struct): `declare` and `read` take the class, and the class's
`__post_init__` holds its cross-field rules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field, fields
from typing import Any, TypeVar

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node

from edge.errors import ConfigError

T = TypeVar("T")
TRUSTED_KEYS = "/etc/sim2real/trusted_keys"  # where a robot keeps the public keys it trusts


def describe(
    text: str,
    *,
    low: float | None = None,
    high: float | None = None,
    integer: bool = False,
    choices: Iterable[str] = (),
) -> ParameterDescriptor:
    d = ParameterDescriptor(description=text)
    if low is not None and integer:
        d.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
    elif low is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)]
    if choices:
        d.additional_constraints = f"one of: {_shown(choices)}"
    return d


def parameter(default: Any, text: str, *, choices: Iterable[str] = (), **ranges: Any) -> Any:
    """A dataclass field that is a node parameter: its default, its descriptor (`describe(text, **ranges)`) and, for
    a parameter that takes one of a fixed set, its choices."""
    choices = tuple(choices)
    descriptor = describe(text, choices=choices, **ranges)
    return field(default=default, metadata={"descriptor": descriptor, "choices": choices})


def trusted_keys_parameter(signed: str) -> Any:
    """The trusted_keys field of a node that runs `signed` only when a trusted key signed it (edge.signing)."""
    return parameter(
        TRUSTED_KEYS, f"comma-separated public keys (PEM files, or directories of *.pub) {signed} must be signed by"
    )


def allow_unsigned_parameter(signed: str) -> Any:
    """The development switch beside trusted_keys: run `signed` unsigned, with a WARN."""
    return parameter(False, f"run an unsigned or wrongly signed {signed}, with a WARN (development only)")


def declare(node: Node, params: type) -> None:
    """Declare every field of `params` with its descriptor; a later `ros2 param set` to a value outside a field's
    choices is refused with the reason (rclpy already refuses one outside a range)."""
    node.declare_parameters("", [(f.name, f.default, f.metadata["descriptor"]) for f in fields(params)])
    choices = {f.name: f.metadata["choices"] for f in fields(params) if f.metadata["choices"]}
    if choices:
        node.add_on_set_parameters_callback(lambda changed: _refuse_outside(changed, choices))


def read(node: Node, params: type[T]) -> T:
    """The node's parameters as `params`; a value outside a field's choices, or one its `__post_init__` refuses,
    raises ConfigError with one line that names the parameter and what it takes."""
    values = {f.name: node.get_parameter(f.name).value for f in fields(params)}
    for f in fields(params):
        problem = _outside(f.name, values[f.name], f.metadata["choices"])
        if problem:
            raise ConfigError(problem)
    # a frozen struct holds tuples: rclpy gives arrays as lists
    return params(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _shown(choices: Iterable[str]) -> str:
    return ", ".join(repr(c) if c == "" else str(c) for c in choices)


def _outside(name: str, value: Any, choices: tuple[str, ...]) -> str | None:
    if choices and value not in choices:
        return f"{name} {value!r} is not one of: {_shown(choices)}"
    return None


def _refuse_outside(changed: list, choices: dict[str, tuple[str, ...]]) -> SetParametersResult:
    for p in changed:
        problem = _outside(p.name, p.value, choices.get(p.name, ()))
        if problem:
            return SetParametersResult(successful=False, reason=problem)
    return SetParametersResult(successful=True)
