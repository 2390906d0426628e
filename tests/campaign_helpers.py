"""Artifacts with known behaviour for the campaign tests, and the tiny campaign they run.

The rover policy is a differential-drive controller written as one linear layer (feedforward from the command
plus proportional feedback on the measured velocity), saved as a real artifact: policy.onnx built with
onnx.helper (no torch import: seconds saved per test module) and the manifest training.export would write.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edge.fileio import atomic_write_bytes, sha256_bytes
from edge.manifest import INPUT_NAME, ONNX_FILE, OUTPUT_NAME, ActionLimits, build_manifest, write_manifest
from sim.robot import joint_target_limits, load_robot
from sim.tasks import load_task

TINY_CAMPAIGN = {
    "name": "tiny",
    "robot": "rover",
    "episode_s": 1.0,
    "seeds": [0],
    "settle_s": 0.25,
    "axes": {"friction": [0.5, 1.0], "commands": ["forward", "turn"]},
    "commands": {"forward": ["forward"], "turn": ["forward for 0.5 s", "turn left"]},
    "gates": {"kpis": {"falls": 0, "tracking_error_lin": 0.3, "tracking_error_ang": 0.6}, "failure_rate": 0.0},
}

# rover observation layout (edge.observation.DEFAULT_TERMS["velocity"], scaled): base_lin_vel * 2 at 0..2,
# base_ang_vel * 0.25 at 3..5, gravity at 6..8, velocity_command * (2, 2, 0.25) at 9..11, joint_vel, last_action
VX, WZ, VX_CMD, WZ_CMD = 0, 5, 9, 11
YAW_TO_WHEEL = 0.2  # wheel action per rad/s of yaw rate: (track / 2) / (radius * action_scale) = 0.2 / (0.1 * 10)
OPSET = 18


def rover_weights(gain: float) -> np.ndarray:
    """(16, 2): wheel actions = (v -+ w * track / 2) / (r * action_scale), v and w = cmd + gain * (cmd - measured).
    gain 1 tracks well; a negative gain feeds the measured motion back with the wrong sign."""
    w = np.zeros((16, 2), np.float32)
    for col, sign in ((0, -1.0), (1, 1.0)):
        w[VX_CMD, col] = 0.5 * (1 + gain)  # vx = obs / 2
        w[VX, col] = -0.5 * gain
        w[WZ_CMD, col] = sign * YAW_TO_WHEEL * 4.0 * (1 + gain)  # wz = obs / 0.25
        w[WZ, col] = -sign * YAW_TO_WHEEL * 4.0 * gain
    return w


def export_rover_policy(out_dir: str | Path, gain: float = 1.0) -> Path:
    return export_linear_policy(out_dir, "rover", rover_weights(gain), f"linear-rover-gain{gain:g}")


def export_standing_quadruped(out_dir: str | Path) -> Path:
    """The quadruped policy that always outputs zero: it holds the default pose, all four feet down."""
    spec = load_robot("quadruped")
    obs_dim = sum(t.size for t in load_task(spec).obs_terms(spec.num_actions))
    return export_linear_policy(out_dir, "quadruped", np.zeros((obs_dim, spec.num_actions), np.float32), "standing")


def export_linear_policy(out_dir: str | Path, robot: str, weights: np.ndarray, run_id: str) -> Path:
    """An artifact whose policy is actions = obs @ weights (weights: (obs_dim, num_actions))."""
    spec = load_robot(robot)
    graph = helper.make_graph(
        [helper.make_node("MatMul", [INPUT_NAME, "w"], [OUTPUT_NAME])],
        f"linear_{robot}",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", weights.shape[0]])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", weights.shape[1]])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)  # ORT reads <= 13
    onnx.checker.check_model(model, full_check=True)
    data = model.SerializeToString()
    manifest = build_manifest(
        spec.to_dict(),
        load_task(spec).obs_terms(spec.num_actions),
        onnx_sha256=sha256_bytes(data),
        run_id=run_id,
        opset=OPSET,
        limits=ActionLimits(joint_target_limits(spec), clip_actions=10.0),
    )
    atomic_write_bytes(Path(out_dir) / ONNX_FILE, data)
    write_manifest(out_dir, manifest)
    return Path(out_dir)
