"""ONNX Runtime execution providers for a device name: the one choice the policy runtime and the instruction
runtime both make (CUDA where this onnxruntime has it, else CPU)."""

from __future__ import annotations

import onnxruntime as ort

from edge.errors import BackendUnavailable, ConfigError

_CPU, _CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"
PROVIDERS: dict[str, tuple[str, ...]] = {"cpu": (_CPU,), "cuda": (_CUDA, _CPU)}  # CPU after CUDA: ORT's fallback
BACKENDS = ("auto", *PROVIDERS)  # auto: CUDA where this onnxruntime has it, else CPU


def providers_for(backend: str) -> list[str]:
    """ONNX Runtime execution providers for a backend name (BACKENDS)."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    has_cuda = _CUDA in ort.get_available_providers()
    if backend == "cuda" and not has_cuda:
        raise BackendUnavailable("this onnxruntime has no CUDAExecutionProvider (needs onnxruntime-gpu and CUDA)")
    return list(PROVIDERS["cuda" if backend == "cuda" or (backend == "auto" and has_cuda) else "cpu"])
