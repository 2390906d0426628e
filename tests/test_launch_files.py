"""What reading the launch files checks and running them cannot (tests/test_ros_launch.py runs them for real under
`ros2 launch`): every parameter they or config/ros/robot.yaml pass is one the node declares (rclpy ignores an
undeclared one without a word), the parameter file's node keys match in any namespace, every argument has a
description, and the lifecycle is driven by launch's events, not LifecycleNode's autostart (launch_ros 0.26.6, on
older Jazzy syncs, has no such argument; a newer launch_ros here would not notice)."""

import ast
import importlib
import inspect
import os
import re
from pathlib import Path

import pytest
import rclpy
import yaml
from rclpy.node import Node
from rclpy.parameter import Parameter

from tests.ros_helpers import ros_env

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))


def console_scripts() -> dict[str, str]:
    """executable -> its node's module, from setup.py's entry points (ros_nodes.console runs ros_nodes.<exe>)."""
    text = (ROOT / "setup.py").read_text()
    return {exe: f"ros_nodes.{node}" for exe, node in re.findall(r'"(\w+) = ros_nodes\.console:(\w+)"', text)}


def launched_nodes(path: Path) -> list[tuple[str, set[str], bool]]:
    """(executable, parameter names passed inline, whether the YAML parameter file is passed) per Node(...) or
    LifecycleNode(...)."""
    nodes = []
    for call in ast.walk(ast.parse(path.read_text())):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) in ("Node", "LifecycleNode"):
            kw = {k.arg: k.value for k in call.keywords}
            assert ast.literal_eval(kw["package"]) == "edge"
            names, uses_file = set(), False
            for item in kw.get("parameters", ast.List(elts=[])).elts:
                if isinstance(item, ast.Dict):
                    names |= {ast.literal_eval(k) for k in item.keys}
                else:
                    uses_file = True
            nodes.append((ast.literal_eval(kw["executable"]), names, uses_file))
    return nodes


def required_parameters(executable: str, tmp_path: Path) -> list[Parameter]:
    """What a node cannot start without (instruction_node loads a model, the tests' small trained one exported
    for the robot, and takes its limits from a policy artifact)."""
    if executable == "instruction_node":
        from tests.campaign_helpers import export_rover_policy
        from tests.rlhf_helpers import minimal_run

        artifact = export_rover_policy(tmp_path / "policy")
        return [
            Parameter("model", value=minimal_run()["onnx_dir"]),
            Parameter("artifact", value=str(artifact)),
            Parameter("allow_unsigned", value=True),
        ]
    return []


def declared_parameters(module_name: str, tmp_path: Path, overrides: list[Parameter] | None = None) -> set[str]:
    module = importlib.import_module(module_name)
    cls = next(
        c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, Node) and c.__module__ == module_name
    )
    os.environ.update({k: v for k, v in ros_env().items() if k.startswith("ROS_")})
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the recorder creates its output directory
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = cls(context=context, parameter_overrides=overrides or [])
        names = set(node._parameters) - {"use_sim_time", "start_type_description_service"}
        node.destroy_node()
        return names
    finally:
        rclpy.shutdown(context=context)
        os.chdir(cwd)


def test_there_are_launch_files():
    assert {p.name for p in LAUNCH_FILES} == {"robot_policy.launch.py", "sim_in_the_loop.launch.py"}


@pytest.mark.parametrize("launch_file", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_names_real_executables_and_declared_parameters(launch_file, tmp_path):
    scripts = console_scripts()
    params_file = yaml.safe_load((ROOT / "config" / "ros" / "robot.yaml").read_text())
    # `/**/node` matches the node in any namespace; a bare `node:` only at the root (namespace:=go1 would ignore it)
    assert all(key.startswith("/**/") for key in params_file), list(params_file)
    for executable, inline, uses_file in launched_nodes(launch_file):
        assert executable in scripts, f"{launch_file.name}: {executable} is not a console script"
        declared = declared_parameters(scripts[executable], tmp_path, required_parameters(executable, tmp_path))
        from_file = set(params_file.get(f"/**/{executable}", {}).get("ros__parameters", {})) if uses_file else set()
        undeclared = (inline | from_file) - declared
        assert not undeclared, f"{launch_file.name}: {executable} does not declare {sorted(undeclared)}"


@pytest.mark.parametrize("launch_file", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_launch_argument_has_a_description(launch_file):
    calls = [
        c
        for c in ast.walk(ast.parse(launch_file.read_text()))
        if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "DeclareLaunchArgument"
    ]
    assert calls
    for call in calls:
        description = {k.arg: k.value for k in call.keywords}.get("description")
        assert isinstance(description, ast.Constant) and description.value, ast.unparse(call)


def test_policy_node_lifecycle_is_driven_by_launch_events_on_every_jazzy():
    calls = [
        c
        for c in ast.walk(ast.parse((ROOT / "launch" / "robot_policy.launch.py").read_text()))
        if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "LifecycleNode"
    ]
    kw = {k.arg: k.value for k in calls[0].keywords} if len(calls) == 1 else {}
    assert ast.literal_eval(kw["executable"]) == "policy_node" and "autostart" not in kw
    # the node's own start-up transitions stay off: launch drives them (else configure would run twice)
    inline = next(i for i in kw["parameters"].elts if isinstance(i, ast.Dict))
    assert {ast.literal_eval(k): v.value for k, v in zip(inline.keys, inline.values, strict=True)
            if isinstance(v, ast.Constant)}["autostart"] is False  # fmt: skip
