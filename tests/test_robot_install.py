"""The robot side installed the way a robot installs it: the package built as a wheel and installed, non-editable,
into a fresh venv with only the robot footprint (`.[robot,instruct]` plus the ROS 2 wheels; no torch, Ray, MuJoCo
or transformers). policy_node, instruction_node and field_recorder run from that venv against sim_bridge_node
from the development venv, over real DDS: a trained policy tracks an instruction's plan, and the MCAP log reads."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from edge.signing import TrustPolicy
from sim2real.sil import SilRequest, run_sil
from tests.package_info import setup_constants
from training.retrain.ingest import log_files, read_field_log

ROOT = Path(__file__).resolve().parents[1]
# the training side's packages: the robot footprint does not even install them (our own sim, training and sim2real
# ship in the same wheel but cannot import without them; lint-imports keeps the robot nodes off them)
HEAVY = ("torch", "ray", "mujoco", "transformers", "vllm", "rsl_rl")


@pytest.fixture(scope="module")
def robot_python(tmp_path_factory) -> Path:
    """A fresh venv holding the built wheel with the robot extras: what `pip install edge[robot,instruct]` gives."""
    root = tmp_path_factory.mktemp("robot-install")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a checkout on the path would count as installed
    wheels = root / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
        cwd=root,  # not the checkout: nothing of the source tree on the path
    )
    wheel = next(wheels.glob("edge-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{wheel}[robot,instruct]", *setup_constants()["ROS_WHEELS"]],
        check=True,
        cwd=root,
        env=env,
    )
    return python


def test_the_robot_footprint_has_no_heavy_packages_and_finds_its_files(robot_python):
    code = (
        "import importlib.util, json, edge.resources as r;"
        f"print(json.dumps([[m, importlib.util.find_spec(m) is not None] for m in {list(HEAVY)!r}]));"
        "print(r.config_path('ros', 'robot.yaml'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package, never a checkout
    out = subprocess.run([str(robot_python), "-c", code], capture_output=True, text=True, check=True, cwd="/", env=env)
    found, config = out.stdout.strip().splitlines()
    assert [m for m, present in yaml.safe_load(found) if present] == []  # not even installed
    # configs come from the installed package's share directory, not a checkout
    assert Path(config).is_file() and Path(config).is_relative_to(robot_python.parents[1] / "share" / "edge")


def test_installed_robot_nodes_drive_the_twin_over_dds(robot_python, trained_rover, tmp_path):
    from tests.rlhf_helpers import minimal_run

    script = tmp_path / "instructions.yaml"
    script.write_text(yaml.safe_dump([{"t_s": 0.0, "text": "drive forward 1 meter"}]))
    logs = tmp_path / "logs"
    request = SilRequest(
        str(trained_rover),
        6.0,
        record=str(logs),
        backend="onnxruntime",
        trust=TrustPolicy(allow_unsigned=True, allow_unvalidated=True),
        instructions=script,
        instruction_model=minimal_run()["onnx_dir"],
        robot_python=str(robot_python),
    )
    sil = run_sil(request)
    assert set(sil["robot_python"].values()) == {str(robot_python)}  # every robot node ran on the installed venv
    (entry,) = sil["instructions"]
    assert entry["valid"] and entry["plan"], entry
    assert sil["falls"] == 0 and sil["tracking_error_lin"] < 0.15, sil  # the policy tracked the plan's commands
    files = log_files(logs)
    assert files
    log = read_field_log(files[0], ["left_wheel_joint", "right_wheel_joint"])
    assert len(log.t) > 100 and not log.damage  # the recorder's MCAP reads
