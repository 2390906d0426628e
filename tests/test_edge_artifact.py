"""The policy artifact end to end on real files: export, parity torch vs ONNX Runtime, integrity refusals,
backend selection. Policies are randomly initialised rsl_rl actors with a non-identity normaliser."""

import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

from benchmarks.edge_policies import export_random_policy, random_actor
from edge.errors import ArtifactError, BackendUnavailable, ObservationError
from edge.fileio import atomic_write_bytes, sha256_file
from edge.manifest import MANIFEST_FILE, ONNX_FILE, ActionLimits, load_manifest, record_verdict
from edge.observation import obs_term
from edge.runtime import OnnxRuntimePolicy, load_policy
from edge.tensorrt_runtime import TRT_NEEDS, tensorrt_unavailable_reason
from sim.robot import build_model, load_robot
from sim.tasks import load_task
from training.export import export_policy
from training.torch_runtime import TorchPolicy

ROBOTS = {"rover": (16, 2), "quadruped": (50, 12)}  # the quadruped observes the gait clock


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """robot -> (actor, manifest, artifact dir), exported once for this module."""
    out = {}
    for robot in ROBOTS:
        path = tmp_path_factory.mktemp(robot)
        actor, manifest = export_random_policy(robot, path, seed=3)
        out[robot] = (actor, manifest, path)
    return out


@pytest.fixture
def artifact_copy(exported, tmp_path):
    """A private copy of the quadruped artifact that a test may damage."""
    dst = tmp_path / "policy"
    shutil.copytree(exported["quadruped"][2], dst)
    return dst


def _edit_manifest(path, edit):
    data = json.loads((path / MANIFEST_FILE).read_text())
    edit(data)
    (path / MANIFEST_FILE).write_text(json.dumps(data))


@pytest.mark.parametrize("robot", ROBOTS)
def test_export_round_trip(exported, robot):
    _, manifest, path = exported[robot]
    spec = load_robot(robot)
    obs_dim, num_actions = ROBOTS[robot]
    model = onnx.load(path / ONNX_FILE)
    onnx.checker.check_model(model, full_check=True)
    (inp,), (out,) = model.graph.input, model.graph.output
    assert inp.name == "obs" and out.name == "actions"
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert inp.type.tensor_type.shape.dim[0].dim_param and inp.type.tensor_type.shape.dim[1].dim_value == obs_dim
    assert out.type.tensor_type.shape.dim[0].dim_param and out.type.tensor_type.shape.dim[1].dim_value == num_actions

    loaded = load_manifest(path)
    assert loaded == manifest
    observations = list(load_task(spec).observations)
    assert loaded.obs_dim == obs_dim == sum(obs_term(t, num_actions).size for t in observations)
    assert [t["name"] for t in loaded.observation["terms"]] == observations
    assert loaded.joint_names == list(spec.joints)
    assert loaded.robot == {"name": robot, "asset": spec.mjcf.name, "asset_sha256": spec.asset_sha256}
    assert loaded.policy["sha256"] == sha256_file(path / ONNX_FILE)
    assert loaded.control["mode"] == spec.control_mode and loaded.control_period == pytest.approx(spec.control_dt)
    assert loaded.control["kp"] == [spec.kp] * num_actions and loaded.control["torque_limit"] == list(spec.torque_limit)
    assert loaded.command_limits == {k: list(getattr(spec.command_limits, k)) for k in ("vx", "vy", "wz")}
    assert loaded.training_run_id == f"random-{robot}-seed3" and loaded.campaign_verdict is None
    offset = spec.default_pose if spec.control_mode == "position" else (0.0,) * num_actions
    np.testing.assert_allclose(loaded.action["offset"], offset)
    np.testing.assert_allclose(loaded.action["scale"], [spec.action_scale] * num_actions)
    assert np.all(loaded.action_vector("low") <= 0) and np.all(loaded.action_vector("high") >= 0)


def test_quadruped_limits_are_the_mjcf_joint_ranges_within_the_action_clip(exported):
    manifest = exported["quadruped"][1]
    spec = load_robot("quadruped")
    model = build_model(spec)
    ranges = np.array([model.joint(j).range for j in spec.joints])
    target_low, target_high = np.array(manifest.action["target_low"]), np.array(manifest.action["target_high"])
    assert np.all(target_low >= ranges[:, 0] - 1e-9) and np.all(target_high <= ranges[:, 1] + 1e-9)
    np.testing.assert_allclose(target_low, ranges[:, 0])  # the clip of +-10 is looser than every lower limit
    assert np.all(np.abs(manifest.action_vector("high")) <= 10.0)


@pytest.mark.parametrize("robot", ROBOTS)
def test_parity_torch_vs_onnxruntime(exported, robot):
    actor, manifest, path = exported[robot]
    rng = np.random.default_rng(7)
    obs = (rng.normal(size=(1000, manifest.obs_dim)) * 3.0).astype(np.float32)
    reference = TorchPolicy(actor, manifest).infer(obs)
    ort_policy = OnnxRuntimePolicy(path)
    assert np.max(np.abs(ort_policy.infer(obs) - reference)) <= 1e-5
    singles = np.stack([ort_policy.infer(o) for o in obs[:20]])  # batch 1, as on the robot
    assert np.max(np.abs(singles - reference[:20])) <= 1e-5
    assert np.abs(reference).max() > 0.1  # a real signal, not a degenerate all-zero net


def test_torch_reference_loads_a_checkpoint_with_weights_only(exported, tmp_path):
    actor, manifest, _ = exported["quadruped"]
    torch.save({"actor_state_dict": actor.state_dict(), "iter": 7, "infos": None}, tmp_path / "model_7.pt")
    fresh = random_actor(manifest.obs_dim, manifest.action_dim, (512, 256, 128), seed=99)
    policy = TorchPolicy.from_checkpoint(fresh, tmp_path / "model_7.pt", manifest)
    obs = np.random.default_rng(0).normal(size=(10, manifest.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(policy.infer(obs), TorchPolicy(actor, manifest).infer(obs), atol=1e-6)


def test_act_applies_the_safety_filter(exported):
    policy = OnnxRuntimePolicy(exported["quadruped"][2])
    obs = np.zeros(50, np.float32)
    obs[5] = np.nan
    np.testing.assert_array_equal(policy.act(obs), np.zeros(12))
    assert policy.safety.fault and policy.safety.fault_count == 1
    huge = np.full((4, 50), 50.0, np.float32)
    actions = policy.act(huge)
    low, high = policy.manifest.action_vector("low"), policy.manifest.action_vector("high")
    assert np.all(actions <= high) and np.all(actions >= low) and np.any(actions == high)


def test_verdict_is_recorded_without_touching_the_policy(artifact_copy):
    record_verdict(artifact_copy, {"passed": True, "campaign": "flat-ground", "episodes": 64})
    assert load_manifest(artifact_copy).campaign_verdict == {"passed": True, "campaign": "flat-ground", "episodes": 64}
    assert OnnxRuntimePolicy(artifact_copy).act(np.zeros(50)).shape == (12,)


def test_tampered_byte_is_refused(artifact_copy):
    onnx_path = artifact_copy / ONNX_FILE
    data = bytearray(onnx_path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one weight
    onnx_path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="sha256 .* does not match the manifest"):
        OnnxRuntimePolicy(artifact_copy)


def test_truncated_onnx_is_refused(artifact_copy):
    onnx_path = artifact_copy / ONNX_FILE
    truncated = onnx_path.read_bytes()[:1000]
    onnx_path.write_bytes(truncated)
    with pytest.raises(ArtifactError, match="truncated"):
        OnnxRuntimePolicy(artifact_copy)
    # even with a manifest that vouches for the broken file, it gets one clear error, not a crash
    _edit_manifest(artifact_copy, lambda m: m["policy"].update(sha256=sha256_file(onnx_path)))
    with pytest.raises(ArtifactError, match="ONNX Runtime cannot load it"):
        OnnxRuntimePolicy(artifact_copy)


def test_onnx_of_another_shape_is_refused(exported, artifact_copy):
    shutil.copy(exported["rover"][2] / ONNX_FILE, artifact_copy / ONNX_FILE)
    _edit_manifest(artifact_copy, lambda m: m["policy"].update(sha256=sha256_file(artifact_copy / ONNX_FILE)))
    with pytest.raises(ArtifactError, match=r"expects 'obs' \[batch, 50\]"):
        OnnxRuntimePolicy(artifact_copy)


def test_onnx_without_dynamic_batch_is_refused(artifact_copy):
    model = onnx.load(artifact_copy / ONNX_FILE)
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 1
    onnx.save(model, artifact_copy / ONNX_FILE)
    _edit_manifest(artifact_copy, lambda m: m["policy"].update(sha256=sha256_file(artifact_copy / ONNX_FILE)))
    with pytest.raises(ArtifactError, match="dynamic batch"):
        OnnxRuntimePolicy(artifact_copy)


def test_missing_manifest_fields_are_named(artifact_copy):
    def drop(m):
        del m["action"]["low"]
        del m["training_run_id"]

    _edit_manifest(artifact_copy, drop)
    with pytest.raises(ArtifactError, match="missing field.*training_run_id, action.low"):
        OnnxRuntimePolicy(artifact_copy)


def test_inconsistent_manifest_is_refused(artifact_copy):
    _edit_manifest(artifact_copy, lambda m: m["action"].update(high=[1.0] * 11))
    with pytest.raises(ArtifactError, match="action.high must hold 12"):
        load_policy(artifact_copy)


def test_other_schema_version_and_missing_manifest_are_refused(artifact_copy):
    _edit_manifest(artifact_copy, lambda m: m.update(schema_version=99))
    with pytest.raises(ArtifactError, match="schema version 99"):
        OnnxRuntimePolicy(artifact_copy)
    (artifact_copy / MANIFEST_FILE).unlink()
    with pytest.raises(ArtifactError, match="no manifest"):
        OnnxRuntimePolicy(artifact_copy)


def test_wrong_observation_size_is_one_clear_error(exported):
    policy = OnnxRuntimePolicy(exported["quadruped"][2])
    for bad in (np.zeros(49), np.zeros((2, 51)), np.zeros((2, 3, 50)), np.zeros((0, 50))):
        with pytest.raises(ObservationError, match=r"shape \(50,\) or \(batch, 50\)"):
            policy.act(bad)


def test_export_refuses_unbounded_actions_and_wrong_output_size(tmp_path):
    spec = load_robot("rover")
    terms = load_task(spec).obs_terms(2)
    actor = random_actor(16, 2, (8,))
    with pytest.raises(ValueError, match="no action limit for joint"):
        export_policy(actor, spec.to_dict(), terms, tmp_path, run_id="x")
    with pytest.raises(ValueError, match="expected \\[2\\]"):
        limits = ActionLimits(clip_actions=5.0)
        export_policy(random_actor(16, 3, (8,)), spec.to_dict(), terms, tmp_path, run_id="x", limits=limits)
    assert not any(tmp_path.iterdir())


def test_atomic_write_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "f.bin"
    atomic_write_bytes(target, b"old")
    atomic_write_bytes(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")
    assert target.read_bytes() == b"new contents" and [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_auto_backend_picks_onnxruntime_here_and_says_why(exported, caplog):
    if tensorrt_unavailable_reason() is None:
        pytest.skip("TensorRT runs on this machine, so auto picks it")
    with caplog.at_level("INFO", logger="edge.runtime"):
        policy = load_policy(exported["rover"][2])
    assert policy.backend == "onnxruntime"
    assert TRT_NEEDS in policy.reason and "ONNX Runtime on CPUExecutionProvider" in policy.reason
    assert policy.reason in caplog.text
    with pytest.raises(BackendUnavailable, match=TRT_NEEDS):
        load_policy(exported["rover"][2], backend="tensorrt")


def test_edge_runtime_imports_no_torch_ros_or_sim():
    code = (
        "import sys, edge.runtime, edge.safety, edge.manifest, edge.tensorrt_runtime, edge.instruct.planner;"
        "bad = {'torch', 'rclpy', 'sim', 'training', 'mujoco', 'tensorrt'} & set(sys.modules); print(sorted(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
