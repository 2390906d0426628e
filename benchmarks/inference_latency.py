"""Per-call policy latency at batch 1: ONNX Runtime (CPU, one intra-op thread) beside torch eager, in one run,
on the rover and quadruped policies (randomly initialised rsl_rl actors, exported as artifacts).

A call is `policy.act(obs)` as the robot makes it: observation check, model, safety filter. The "model" columns
time `policy.infer(obs)` (no safety filter). Torch runs with one thread, its faster setting for batch 1 here.
Calls alternate between the runtimes in blocks, so drift in machine load hits both alike.
The JSON on the last line gives the quadruped's `act` figures; ratio = torch p50 / ONNX Runtime p50.

    python -m benchmarks.inference_latency [--quick]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np
import torch

from benchmarks.edge_policies import export_random_policy
from edge.policy import Policy
from edge.runtime import OnnxRuntimePolicy
from training.torch_runtime import TorchPolicy

ROBOTS = ("rover", "quadruped")
BLOCK = 500  # calls per runtime before switching to the other


def _time_calls(fn, obs: np.ndarray) -> np.ndarray:
    times = np.empty(len(obs))
    clock = time.perf_counter
    for i, x in enumerate(obs):
        t0 = clock()
        fn(x)
        times[i] = clock() - t0
    return times


def measure(policies: dict[str, Policy], calls: int, obs_dim: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """p50/p99 latency (ms) of act() and infer() for each policy, interleaved in blocks."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(calls, obs_dim)).astype(np.float32)
    samples = {(name, kind): [] for name in policies for kind in ("act", "infer")}
    for policy in policies.values():  # warm-up: first calls allocate
        _time_calls(policy.act, obs[:BLOCK])
    for start in range(0, calls, BLOCK):
        block = obs[start : start + BLOCK]
        for name, policy in policies.items():
            samples[name, "act"].append(_time_calls(policy.act, block))
            samples[name, "infer"].append(_time_calls(policy.infer, block))
    result = {}
    for name in policies:
        act, infer = np.concatenate(samples[name, "act"]), np.concatenate(samples[name, "infer"])
        result[name] = {
            "p50_ms": float(np.percentile(act, 50) * 1e3),
            "p99_ms": float(np.percentile(act, 99) * 1e3),
            "model_p50_ms": float(np.percentile(infer, 50) * 1e3),
            "model_p99_ms": float(np.percentile(infer, 99) * 1e3),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3,000 calls per runtime instead of 20,000")
    parser.add_argument("--calls", type=int, default=None, help="calls per runtime and robot")
    args = parser.parse_args()
    calls = args.calls or (3_000 if args.quick else 20_000)
    torch.set_num_threads(1)

    figures = {}
    print(f"batch 1, {calls} calls per runtime; ONNX Runtime: 1 intra-op thread, CPU EP; torch eager: 1 thread")
    print(f"{'robot':10s} {'runtime':12s} {'p50 ms':>8s} {'p99 ms':>8s} {'model p50':>10s} {'model p99':>10s}")
    for robot in ROBOTS:
        with tempfile.TemporaryDirectory() as artifact:
            actor, manifest = export_random_policy(robot, artifact)
            policies = {"onnxruntime": OnnxRuntimePolicy(artifact), "torch": TorchPolicy(actor, manifest)}
            figures[robot] = measure(policies, calls, manifest.obs_dim)
        for name, f in figures[robot].items():
            print(
                f"{robot:10s} {name:12s} {f['p50_ms']:8.4f} {f['p99_ms']:8.4f} "
                f"{f['model_p50_ms']:10.4f} {f['model_p99_ms']:10.4f}"
            )
        ratio = figures[robot]["torch"]["p50_ms"] / figures[robot]["onnxruntime"]["p50_ms"]
        print(f"{robot:10s} torch p50 / ONNX Runtime p50 = {ratio:.2f}x")

    q = figures["quadruped"]
    summary = {
        "bench": "inference_latency",
        "robot": "quadruped",
        "batch": 1,
        "calls": calls,
        "ort_p50_ms": round(q["onnxruntime"]["p50_ms"], 4),
        "ort_p99_ms": round(q["onnxruntime"]["p99_ms"], 4),
        "torch_p50_ms": round(q["torch"]["p50_ms"], 4),
        "torch_p99_ms": round(q["torch"]["p99_ms"], 4),
        "baseline": "torch eager (1 thread)",
        "ratio": round(q["torch"]["p50_ms"] / q["onnxruntime"]["p50_ms"], 2),
        "per_robot": {
            robot: {name: {k: round(v, 4) for k, v in f.items()} for name, f in fig.items()}
            for robot, fig in figures.items()
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
