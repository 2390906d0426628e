"""TensorRT engine build, cache and parity against ONNX Runtime; runs only where a CUDA GPU and TensorRT are."""

import shutil

import numpy as np
import pytest

from benchmarks.edge_policies import export_random_policy
from edge.errors import ArtifactError
from edge.manifest import ONNX_FILE
from edge.runtime import OnnxRuntimePolicy, load_policy
from edge.tensorrt_runtime import TRT_NEEDS, TensorRTPolicy, tensorrt_unavailable_reason

pytestmark = pytest.mark.skipif(tensorrt_unavailable_reason() is not None, reason=TRT_NEEDS)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("quadruped")
    export_random_policy("quadruped", path)
    return path


def test_engine_is_built_cached_and_matches_onnxruntime(artifact):
    policy = TensorRTPolicy(artifact)
    engine = policy.engine_file
    assert engine.is_file() and policy.manifest.policy["sha256"][:16] in engine.name
    built_at = engine.stat().st_mtime_ns
    obs = np.random.default_rng(0).normal(size=(256, policy.manifest.obs_dim)).astype(np.float32)
    reference = OnnxRuntimePolicy(artifact).infer(obs)
    assert np.max(np.abs(policy.infer(obs) - reference)) < 2e-2  # FP16 engine
    assert np.max(np.abs(np.stack([policy.infer(o) for o in obs[:8]]) - reference[:8])) < 2e-2
    again = TensorRTPolicy(artifact)
    assert again.engine_file == engine and engine.stat().st_mtime_ns == built_at  # loaded, not rebuilt


def test_auto_backend_picks_tensorrt(artifact):
    policy = load_policy(artifact)
    assert policy.backend == "tensorrt" and "TensorRT engine on" in policy.reason


def test_tampered_onnx_is_refused_before_any_engine_is_used(artifact, tmp_path):
    copy = tmp_path / "policy"
    shutil.copytree(artifact, copy)
    data = bytearray((copy / ONNX_FILE).read_bytes())
    data[-10] ^= 0xFF
    (copy / ONNX_FILE).write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="does not match the manifest"):
        TensorRTPolicy(copy)
