"""TensorRT runtime. The engine is built from policy.onnx on the target GPU itself (engines are not portable across
GPU models or TensorRT versions), cached next to the artifact under a name holding (onnx sha256, TensorRT version,
GPU name, precision, max batch), and run with execute_async_v3 on cuda-python buffers, so the robot needs no torch.
tensorrt and cuda-python are imported only when a TensorRT policy is asked for.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from edge.artifact import check_io, read_artifact
from edge.errors import BackendUnavailable, ObservationError
from edge.fileio import atomic_write_bytes
from edge.policy import Policy

log = logging.getLogger(__name__)

TRT_NEEDS = "TensorRT needs a CUDA GPU"


def _cudart():
    try:
        # cuda-python >= 12.8; cuda-python and tensorrt come with JetPack or a CUDA machine, not with any extra here
        from cuda.bindings import runtime as cudart  # pyright: ignore[reportMissingImports]
    except ImportError:
        from cuda import cudart  # pyright: ignore[reportMissingImports]  # older cuda-python, as on JetPack 6
    return cudart


def _cuda(cudart, result: tuple) -> Any:
    """cuda-python calls return (error, *values): raise on an error, else return the value(s) (untyped handles)."""
    err, *values = result
    if err != cudart.cudaError_t.cudaSuccess:
        raise BackendUnavailable(f"CUDA call failed: {err}")
    return values[0] if len(values) == 1 else values


def tensorrt_unavailable_reason() -> str | None:
    """None when TensorRT can run here, else a one-line reason starting with TRT_NEEDS."""
    try:
        import tensorrt  # noqa: F401  # pyright: ignore[reportMissingImports]
    except (ImportError, OSError) as e:  # OSError: the wheel is there but libnvinfer is not
        return f"{TRT_NEEDS}: the tensorrt package cannot be imported ({e})"
    try:
        cudart = _cudart()
    except ImportError:
        return f"{TRT_NEEDS}: cuda-python is not installed"
    err, count = cudart.cudaGetDeviceCount()
    if err != cudart.cudaError_t.cudaSuccess or count == 0:
        return f"{TRT_NEEDS}: no CUDA device is visible ({err})"
    return None


def gpu_name(device: int = 0) -> str:
    cudart = _cudart()
    name = _cuda(cudart, cudart.cudaGetDeviceProperties(device)).name
    return (name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name)).strip()


def engine_path(
    artifact_dir: str | Path, onnx_sha256: str, trt_version: str, gpu: str, fp16: bool, max_batch: int
) -> Path:
    """Where the engine for this (ONNX, TensorRT version, GPU, precision, max batch) is cached."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower()
    precision = "fp16" if fp16 else "fp32"
    return Path(artifact_dir) / f"policy.{onnx_sha256[:16]}.trt{trt_version}.{slug}.{precision}.b{max_batch}.engine"


def build_engine(onnx_bytes: bytes, input_name: str, obs_dim: int, *, fp16: bool = True, max_batch: int = 256) -> bytes:
    """A serialized TensorRT engine (plan) for `onnx_bytes`, batch 1..max_batch, tuned for batch 1."""
    import tensorrt as trt  # pyright: ignore[reportMissingImports]

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT 10: every network is explicit-batch
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BackendUnavailable(f"TensorRT's ONNX parser rejected policy.onnx: {errors}")
    config = builder.create_builder_config()
    if fp16 and hasattr(trt.BuilderFlag, "FP16"):
        config.set_flag(trt.BuilderFlag.FP16)
    elif fp16:
        # TensorRT 11 removed weak typing: precision comes from the ONNX graph, which is FP32
        log.warning("TensorRT %s has no FP16 builder flag; the engine runs in the ONNX's FP32", trt.__version__)
    profile = builder.create_optimization_profile()
    profile.set_shape(input_name, (1, obs_dim), (1, obs_dim), (max_batch, obs_dim))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise BackendUnavailable("TensorRT could not build an engine from policy.onnx (its log above says why)")
    return bytes(plan)


class TensorRTPolicy(Policy):
    """policy.onnx as a TensorRT engine: built on first use on this GPU, then loaded from the cache."""

    backend = "tensorrt"

    def __init__(
        self, artifact_dir: str | Path, *, fp16: bool = True, max_batch: int = 256, device: int = 0, safety: bool = True
    ):
        why_not = tensorrt_unavailable_reason()
        if why_not is not None:
            raise BackendUnavailable(why_not)
        import tensorrt as trt  # pyright: ignore[reportMissingImports]

        manifest, onnx_bytes = read_artifact(artifact_dir)
        super().__init__(manifest, safety)
        self._cudart = cudart = _cudart()
        _cuda(cudart, cudart.cudaSetDevice(device))
        self.gpu_name = gpu_name(device)
        self.max_batch = max_batch
        built_fp16 = fp16 and hasattr(trt.BuilderFlag, "FP16")  # TensorRT 11 builds the ONNX's own precision
        self.engine_file = engine_path(
            artifact_dir, manifest.policy["sha256"], trt.__version__, self.gpu_name, built_fp16, max_batch
        )
        self._logger = trt.Logger(trt.Logger.WARNING)  # kept: TensorRT objects log through it for their lifetime
        self._runtime = trt.Runtime(self._logger)
        engine = None
        if self.engine_file.is_file():
            # None when this TensorRT refuses the plan (e.g. copied from another machine despite its name)
            engine = self._runtime.deserialize_cuda_engine(self.engine_file.read_bytes())
        if engine is None:
            log.info("building TensorRT engine %s (once per GPU and TensorRT version)", self.engine_file.name)
            plan = build_engine(onnx_bytes, manifest.policy["input"], manifest.obs_dim, fp16=fp16, max_batch=max_batch)
            try:
                atomic_write_bytes(self.engine_file, plan)
            except OSError as e:  # an artifact installed read-only still runs; it just rebuilds at each start
                log.warning("cannot cache the TensorRT engine at %s (%s); rebuilt each start", self.engine_file, e)
            engine = self._runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise BackendUnavailable(f"TensorRT cannot deserialize the engine it just built ({self.engine_file})")
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        for name in names:
            if engine.get_tensor_dtype(name) != trt.DataType.FLOAT:
                raise BackendUnavailable(f"{self.engine_file}: tensor {name!r} is not float32")
        io = {
            mode: [(n, list(engine.get_tensor_shape(n))) for n in names if engine.get_tensor_mode(n) == mode]
            for mode in (trt.TensorIOMode.INPUT, trt.TensorIOMode.OUTPUT)
        }
        check_io(manifest, io[trt.TensorIOMode.INPUT], io[trt.TensorIOMode.OUTPUT], str(self.engine_file))

        self._engine = engine
        self._context = engine.create_execution_context()
        self._input, self._output = manifest.policy["input"], manifest.policy["output"]
        self._d_in = _cuda(cudart, cudart.cudaMalloc(max_batch * manifest.obs_dim * 4))
        self._d_out = _cuda(cudart, cudart.cudaMalloc(max_batch * manifest.action_dim * 4))
        self._stream = _cuda(cudart, cudart.cudaStreamCreate())  # last: close() frees everything once it exists
        self._context.set_tensor_address(self._input, int(self._d_in))
        self._context.set_tensor_address(self._output, int(self._d_out))

    def _run(self, obs: np.ndarray) -> np.ndarray:
        batch = obs.shape[0]
        if batch > self.max_batch:
            raise ObservationError(f"batch {batch} exceeds the engine's maximum batch {self.max_batch}")
        cudart, stream = self._cudart, self._stream
        if stream is None:
            raise RuntimeError("this TensorRT policy is closed (its device buffers are freed)")
        out = np.empty((batch, self.action_dim), np.float32)
        self._context.set_input_shape(self._input, (batch, self.obs_dim))
        h2d, d2h = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        _cuda(cudart, cudart.cudaMemcpyAsync(self._d_in, obs.ctypes.data, obs.nbytes, h2d, stream))
        if not self._context.execute_async_v3(int(stream)):
            raise RuntimeError("TensorRT execute_async_v3 failed (its log above says why)")
        _cuda(cudart, cudart.cudaMemcpyAsync(out.ctypes.data, self._d_out, out.nbytes, d2h, stream))
        _cuda(cudart, cudart.cudaStreamSynchronize(stream))
        return out

    def close(self) -> None:
        """Free the device buffers and the stream (also done when the policy is garbage-collected)."""
        if getattr(self, "_stream", None) is None:
            return
        cudart = self._cudart
        cudart.cudaFree(self._d_in)
        cudart.cudaFree(self._d_out)
        cudart.cudaStreamDestroy(self._stream)
        self._stream = None

    def __del__(self) -> None:
        self.close()
