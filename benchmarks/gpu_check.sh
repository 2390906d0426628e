#!/usr/bin/env bash
# TensorRT check for a machine with a CUDA GPU (a Jetson Thor, a workstation): build the engine from a policy
# artifact, check it against ONNX Runtime and time both at batch 1, after the TensorRT tests. The last line is JSON.
#
#   benchmarks/gpu_check.sh [ARTIFACT_DIR]     # default: a random quadruped policy exported to a temp dir
#
# Needs tensorrt (10.x; JetPack ships it) and cuda-python beside the project's packages, e.g.
#   pip install tensorrt-cu12 cuda-python     (x86_64 workstation; on Jetson use the JetPack TensorRT)
# Python: $PYTHON, else .venv/bin/python, else python3. Exit status non-zero when parity fails.
set -euo pipefail
ARTIFACT=${1:+$(realpath "$1")}  # before the cd below, so a relative path means what the caller meant
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}

if [ -z "$ARTIFACT" ]; then
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    ARTIFACT=$WORK/policy
    "$PY" -m benchmarks.edge_policies quadruped "$ARTIFACT"
fi

"$PY" -m pytest -q -rs tests/test_edge_tensorrt.py

"$PY" - "$ARTIFACT" <<'PYEOF'
import json, sys, time

import numpy as np

from edge.runtime import OnnxRuntimePolicy
from edge.tensorrt_runtime import TensorRTPolicy, tensorrt_unavailable_reason

artifact = sys.argv[1]
why_not = tensorrt_unavailable_reason()
if why_not:
    sys.exit(why_not)
t0 = time.perf_counter()
trt_policy = TensorRTPolicy(artifact)
load_s = time.perf_counter() - t0
ort_policy = OnnxRuntimePolicy(artifact)
print(f"engine {trt_policy.engine_file.name} on {trt_policy.gpu_name}: ready in {load_s:.1f} s (build or cache load)")

obs = (np.random.default_rng(0).normal(size=(1000, trt_policy.obs_dim)) * 2).astype(np.float32)
err_batch = float(np.max(np.abs(trt_policy.infer(obs[:256]) - ort_policy.infer(obs[:256]))))
err_single = max(float(np.max(np.abs(trt_policy.infer(o) - ort_policy.infer(o)))) for o in obs[:100])
print(f"parity TensorRT vs ONNX Runtime: max |diff| {err_batch:.2e} (batch 256), {err_single:.2e} (batch 1)")


def latency(policy, n=5000):
    for o in obs[:500]:
        policy.act(o)
    times = np.empty(n)
    for i in range(n):
        t = time.perf_counter()
        policy.act(obs[i % len(obs)])
        times[i] = time.perf_counter() - t
    return float(np.percentile(times, 50) * 1e3), float(np.percentile(times, 99) * 1e3)


trt_p50, trt_p99 = latency(trt_policy)
ort_p50, ort_p99 = latency(ort_policy)
print(f"{'runtime':12s} {'p50 ms':>8s} {'p99 ms':>8s}")
print(f"{'tensorrt':12s} {trt_p50:8.4f} {trt_p99:8.4f}")
print(f"{'onnxruntime':12s} {ort_p50:8.4f} {ort_p99:8.4f}  ({ort_policy.providers[0]})")
ok = err_batch < 2e-2 and err_single < 2e-2  # FP16 engine against the FP32 model
print(json.dumps({
    "bench": "gpu_check", "gpu": trt_policy.gpu_name, "engine": trt_policy.engine_file.name,
    "engine_ready_s": round(load_s, 2), "max_abs_diff": max(err_batch, err_single), "parity_ok": ok,
    "trt_p50_ms": round(trt_p50, 4), "trt_p99_ms": round(trt_p99, 4),
    "ort_p50_ms": round(ort_p50, 4), "ort_p99_ms": round(ort_p99, 4), "baseline": "onnxruntime",
    "ratio": round(ort_p50 / trt_p50, 2),
}))
sys.exit(0 if ok else 1)
PYEOF
