"""ONNX Runtime policy and backend selection (`load_policy(..., backend="auto")`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import cast

import numpy as np
import onnxruntime as ort

from edge.artifact import check_io, read_artifact
from edge.errors import ArtifactError, BackendUnavailable, ConfigError
from edge.policy import Policy
from edge.providers import providers_for
from edge.tensorrt_runtime import TensorRTPolicy, tensorrt_unavailable_reason

log = logging.getLogger(__name__)

BACKENDS = ("auto", "tensorrt", "onnxruntime")


class OnnxRuntimePolicy(Policy):
    """policy.onnx on ONNX Runtime: the CUDA execution provider where present (device="auto"), else CPU."""

    backend = "onnxruntime"

    def __init__(
        self, artifact_dir: str | Path, *, device: str = "auto", intra_op_threads: int = 1, safety: bool = True
    ):
        providers = providers_for(device)
        manifest, onnx_bytes = read_artifact(artifact_dir)
        super().__init__(manifest, safety)
        opts = ort.SessionOptions()
        # a batch-1 MLP is done in tens of microseconds: handing work to a thread pool costs more than it saves
        opts.intra_op_num_threads = intra_op_threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        source = str(Path(artifact_dir) / manifest.policy["file"])
        try:
            self.session = ort.InferenceSession(onnx_bytes, opts, providers=providers)
        except Exception as e:  # onnxruntime's own exception types (InvalidProtobuf, Fail, ...) derive from Exception
            raise ArtifactError(f"{source}: ONNX Runtime cannot load it: {str(e).strip().splitlines()[0]}") from None
        self.providers = self.session.get_providers()
        check_io(
            manifest,
            [(i.name, i.shape) for i in self.session.get_inputs()],
            [(o.name, o.shape) for o in self.session.get_outputs()],
            source,
        )
        self._input = manifest.policy["input"]
        self._outputs = [manifest.policy["output"]]

    def _run(self, obs: np.ndarray) -> np.ndarray:
        # check_io held the output to a [batch, action_dim] tensor (onnxruntime's annotation allows sparse, list, dict)
        return cast(np.ndarray, self.session.run(self._outputs, {self._input: obs})[0])


def load_policy(
    artifact_dir: str | Path,
    backend: str = "auto",
    *,
    safety: bool = True,
    intra_op_threads: int = 1,
    max_batch: int = 256,
) -> Policy:
    """Load a verified artifact on `backend`. "auto" takes TensorRT where it can run (CUDA GPU, tensorrt,
    cuda-python), else ONNX Runtime (CUDA EP where present, else CPU); `policy.reason` says why.
    intra_op_threads applies to ONNX Runtime, max_batch (the engine's largest batch) to TensorRT."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    notes = []
    if backend in ("auto", "tensorrt"):
        why_not = tensorrt_unavailable_reason()
        if why_not is None:
            try:
                policy = TensorRTPolicy(artifact_dir, max_batch=max_batch, safety=safety)
                policy.reason = f"TensorRT engine on {policy.gpu_name}"
                log.info("policy backend: %s", policy.reason)
                return policy
            except BackendUnavailable as e:
                if backend == "tensorrt":
                    raise
                notes.append(f"TensorRT not chosen: {e}")
        elif backend == "tensorrt":
            raise BackendUnavailable(why_not)
        else:
            notes.append(f"TensorRT not chosen: {why_not}")
    policy = OnnxRuntimePolicy(artifact_dir, intra_op_threads=intra_op_threads, safety=safety)
    notes.append(f"ONNX Runtime on {policy.providers[0]}")
    policy.reason = "; ".join(notes)
    log.info("policy backend: %s", policy.reason)
    return policy
