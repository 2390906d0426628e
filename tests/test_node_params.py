"""Each node's parameters are one frozen struct (ros_nodes/*_params.py, declared and read through ros_nodes.params):
every parameter has a description, a numeric one its range, one of a fixed set its choices (`ros2 param describe`
shows them as "one of: ..."); a value outside the choices is refused with one line when the node reads it, and a
`ros2 param set` to one is refused with the same line. In-process, with real rclpy nodes on this test's own domain."""

import os
from contextlib import contextmanager
from dataclasses import FrozenInstanceError, fields

import pytest
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter

from edge.errors import ConfigError
from ros_nodes.field_recorder_params import FieldRecorderParams
from ros_nodes.instruction_params import InstructionParams
from ros_nodes.params import declare, read
from ros_nodes.policy_params import PolicyParams
from ros_nodes.sim_bridge_params import SimBridgeParams
from tests.ros_helpers import ros_env

STRUCTS = {
    "policy_node": PolicyParams,
    "instruction_node": InstructionParams,
    "sim_bridge_node": SimBridgeParams,
    "field_recorder": FieldRecorderParams,
}
CHOICES = [(node, f.name) for node, s in STRUCTS.items() for f in fields(s) if f.metadata["choices"]]
# what a fixed set is: every parameter of these names takes one (instruction_node's backend has its own set)
MUST_HAVE_CHOICES = {"backend", "safe_mode", "output_type", "trigger", "executor"}


@contextmanager
def ros_context():
    os.environ.update({k: v for k, v in ros_env().items() if k.startswith("ROS_")})
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@contextmanager
def declared(params: type, **overrides):
    """A plain node that declares `params`, with `overrides` as if given on the command line."""
    with ros_context() as context:
        given = [Parameter(k, value=v) for k, v in overrides.items()]
        node = Node("params_under_test", context=context, parameter_overrides=given)
        try:
            declare(node, params)
            yield node
        finally:
            node.destroy_node()


@pytest.mark.parametrize("params", STRUCTS.values(), ids=STRUCTS)
def test_every_parameter_is_declared_with_a_description_and_its_range_or_choices(params):
    assert params.__dataclass_params__.frozen
    with declared(params) as node:
        assert {f.name for f in fields(params)} <= set(node._parameters)
        for f in fields(params):
            d = node.describe_parameter(f.name)
            assert d.description.strip(), f.name
            if type(f.default) in (int, float):
                ranges = [*d.integer_range, *d.floating_point_range]
                assert len(ranges) == 1, f"{f.name}: no range"
                assert ranges[0].from_value <= f.default <= ranges[0].to_value, f.name
            choices = f.metadata["choices"]
            assert bool(choices) == bool(d.additional_constraints), f.name
            if choices:
                assert f.default in choices, f.name
                assert d.additional_constraints.startswith("one of: "), d.additional_constraints
                assert f.name in MUST_HAVE_CHOICES, f"{f.name} has choices: add it to MUST_HAVE_CHOICES"
            else:
                assert f.name not in MUST_HAVE_CHOICES, f"{f.name} takes one of a fixed set: give it choices"


def test_the_descriptor_shows_the_choices_and_the_empty_one():
    with declared(SimBridgeParams) as node:
        assert node.describe_parameter("safe_mode").additional_constraints == "one of: '', hold, damp"


@pytest.mark.parametrize("node_name, name", CHOICES, ids=[f"{n}.{p}" for n, p in CHOICES])
def test_a_value_outside_the_choices_is_refused_with_one_line(node_name, name):
    params = STRUCTS[node_name]
    overrides = {"model": "m", "artifact": "a"} if params is InstructionParams else {}  # its required directories
    with declared(params, **overrides, **{name: "warp"}) as node:
        with pytest.raises(ConfigError) as refused:
            read(node, params)
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"{name} 'warp' is not one of: "), message
        # set later (ros2 param set): refused with the same line, a choice accepted
        result = node.set_parameters([Parameter(name, value="warp2")])[0]
        assert not result.successful and result.reason.startswith(f"{name} 'warp2' is not one of: "), result
        choice = next(c for f in fields(params) if f.name == name for c in f.metadata["choices"] if c)
        assert node.set_parameters([Parameter(name, value=choice)])[0].successful
        assert getattr(read(node, params), name) == choice


def test_read_gives_the_struct_with_the_values_set():
    with declared(FieldRecorderParams, topics=["odom"], segment_s=2.0) as node:
        p = read(node, FieldRecorderParams)
    assert p == FieldRecorderParams(topics=("odom",), segment_s=2.0)
    with pytest.raises(FrozenInstanceError):
        p.segment_s = 3.0
    with declared(PolicyParams, gyro_bias=[0.0, 0.0, 0.02]) as node:
        assert read(node, PolicyParams).gyro_bias == (0.0, 0.0, 0.02)  # a double array, as the struct holds it


def test_a_value_outside_a_range_is_refused_by_rclpy():
    from rclpy.exceptions import InvalidParameterValueException

    with pytest.raises(InvalidParameterValueException), declared(FieldRecorderParams, segment_mb=0.0):
        pass


def test_cross_field_rules_refuse_in_post_init():
    with pytest.raises(ConfigError, match=r"parameter 'model' \(exported instruction model directory\) is required"):
        InstructionParams(artifact="policy")
    with pytest.raises(ConfigError, match=r"parameter 'artifact' \(policy directory\) is required"):
        InstructionParams(model="model")
    with pytest.raises(ConfigError, match=r"^gyro_bias \[0.0, 0.02\] must be three finite numbers"):
        PolicyParams(gyro_bias=(0.0, 0.02))


def test_the_nodes_declare_their_structs_and_refuse_a_bad_choice(tmp_path, capfd):
    """The real nodes: named `<x>_node` (the recorder aside), declaring exactly their struct's parameters; a bad
    choice stops instruction_node and sim_bridge_node as they start and fails policy_node's configure."""
    from ros_nodes.field_recorder import FieldRecorder
    from ros_nodes.instruction_node import InstructionNode
    from ros_nodes.policy_node import PolicyNode
    from ros_nodes.sim_bridge_node import SimBridge

    ros_own = {"use_sim_time", "start_type_description_service"}
    with ros_context() as context:
        for cls, params, given in (
            (PolicyNode, PolicyParams, []),
            (SimBridge, SimBridgeParams, []),
            (FieldRecorder, FieldRecorderParams, [Parameter("output_dir", value=str(tmp_path / "logs"))]),
        ):
            node = cls(context=context, parameter_overrides=given)
            try:
                name = next(n for n, s in STRUCTS.items() if s is params)
                assert node.get_name() == name
                assert set(node._parameters) - ros_own == {f.name for f in fields(params)}
            finally:
                if cls is SimBridge:
                    node.twin.close()
                node.destroy_node()

        warp = [Parameter("backend", value="warp")]
        with pytest.raises(ConfigError, match=r"^backend 'warp' is not one of: auto, cpu, cuda$"):
            InstructionNode(context=context, parameter_overrides=warp)
        with pytest.raises(ConfigError, match=r"^safe_mode 'brake' is not one of: '', hold, damp$"):
            SimBridge(context=context, parameter_overrides=[Parameter("safe_mode", value="brake")])
        policy = PolicyNode(context=context, parameter_overrides=[*warp, Parameter("autostart", value=False)])
        try:
            capfd.readouterr()
            assert policy.trigger_configure() == TransitionCallbackReturn.FAILURE
        finally:
            policy.destroy_node()
    errors = [line for line in capfd.readouterr().err.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "backend 'warp' is not one of: auto, tensorrt, onnxruntime" in errors[0], errors
