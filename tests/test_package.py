"""The ROS 2 package metadata: what `colcon build` on the robot checks before it builds anything."""

import ast
import subprocess
import sys
from pathlib import Path

from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parent.parent


def test_package_xml_is_valid_format_3():
    pkg = parse_package(str(ROOT / "package.xml"))
    pkg.validate()  # raises InvalidPackage on what the ROS tools reject (name, version, maintainers, licenses)
    assert pkg.package_format == 3
    assert pkg.name == "edge"
    assert pkg.licenses and pkg.maintainers
    assert pkg.get_build_type() == "ament_python"
    exec_deps = {d.name for d in pkg.exec_depends}
    for dep in (
        "rclpy",
        "std_msgs",
        "sensor_msgs",
        "geometry_msgs",
        "nav_msgs",
        "diagnostic_msgs",
        "launch",
        "launch_ros",
    ):
        assert dep in exec_deps, dep


def test_layout_matches_design():
    for path in (
        "package.xml",
        "setup.py",
        "setup.cfg",
        "resource/edge",
        "ros_nodes",
        "training",
        "sim",
        "edge",
        "launch",
        "tests",
        "config",
        "benchmarks",
        "docs",
    ):
        assert (ROOT / path).exists(), path


def test_setup_declares_extras_and_console_script():
    tree = ast.parse((ROOT / "setup.py").read_text())
    extras = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.targets[0].id == "EXTRAS")
    names = {k.value for k in extras.value.keys}
    assert {"robot", "sim", "train", "rlhf", "dev"} <= names
    robot = next(v for k, v in zip(extras.value.keys, extras.value.values, strict=True) if k.value == "robot")
    robot_deps = " ".join(e.value for e in robot.elts)
    for heavy in ("torch", "ray", "mujoco"):  # the robot footprint stays small
        assert heavy not in robot_deps


def test_edge_imports_without_sim_or_torch():
    code = "import sys, edge.observation; print({'torch', 'mujoco', 'ray', 'rclpy', 'sim'} & set(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "set()"
