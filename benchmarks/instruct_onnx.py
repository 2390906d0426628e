"""The robot's instruction runtime (ONNX Runtime, edge.instruct.onnx_generator) beside transformers' generate
(training.rlhf.generation.HFGenerator) on the same model, in the same run: greedy constrained plans on the held-out
set (how many are the same, intent accuracy of both) and the latency of one plan as instruction_node makes it
(InstructionPlanner.plan, one instruction at a time, after one warm-up plan).

Both run on one thread (torch.set_num_threads(1), ONNX Runtime intra-op 1). The model is exported to a temporary
directory first (training.rlhf.export_onnx).

    python -m benchmarks.instruct_onnx --model runs/rlhf/rl [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

HELDOUT = Path(__file__).resolve().parents[1] / "config" / "rlhf" / "heldout.jsonl"


def _latency_ms(planner, items) -> list[float]:
    planner.plan("go forward 1 m")  # warm-up: the session's first run and the grammar's first rows
    times = []
    for item in items:
        start = time.perf_counter()
        planner.plan(item.instruction, item.state)
        times.append(1e3 * (time.perf_counter() - start))
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="instruction model directory (Hugging Face format)")
    parser.add_argument("--quick", action="store_true", help="latency on the first 30 held-out lines only")
    parser.add_argument("--robot", default="rover", help="robot whose command limits clamp the plans")
    args = parser.parse_args()

    import torch

    from edge.instruct.onnx_generator import OnnxGenerator, providers_for
    from edge.instruct.planner import InstructionPlanner
    from training.rlhf.evaluate import evaluate, load_eval_set, summarize
    from training.rlhf.export_onnx import export_instruction_model
    from training.rlhf.generation import HFGenerator
    from training.rlhf.limits import limits_for
    from training.rlhf.model import load_model

    torch.set_num_threads(1)
    items, limits = load_eval_set(HELDOUT), limits_for(args.robot)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        export_instruction_model(args.model, tmp)
        export_s = time.perf_counter() - start
        onnx = OnnxGenerator(tmp, providers_for("cpu"), threads=1)
        hf = HFGenerator(*load_model(args.model))
        ours, theirs = evaluate(onnx, items, limits), evaluate(hf, items, limits)
        timed = items[:30] if args.quick else items
        latency = {
            "onnx": _latency_ms(InstructionPlanner(onnx, limits), timed),
            "hf": _latency_ms(InstructionPlanner(hf, limits), timed),
        }
    differ = [
        (a.item.instruction, a.planned.output, b.planned.output)
        for a, b in zip(ours, theirs, strict=True)
        if a.planned.output != b.planned.output
    ]
    acc = {"onnx": summarize(ours)["intent_accuracy"], "hf": summarize(theirs)["intent_accuracy"]}
    stats = {
        k: {"p50": v[len(v) // 2], "p90": v[int(0.9 * len(v))], "max": v[-1], "mean": statistics.mean(v)}
        for k, v in latency.items()
    }
    print(f"model {args.model}; export {export_s:.1f} s; held-out set {len(items)} lines, greedy, constrained")
    print(f"{'generator':34s} {'accuracy':>8s} {'p50 ms':>7s} {'p90 ms':>7s} {'max ms':>7s} {'mean ms':>8s}")
    for key, name in (("onnx", "ONNX Runtime (OnnxGenerator)"), ("hf", "transformers generate (HFGenerator)")):
        s = stats[key]
        print(f"{name:34s} {acc[key]:8.1%} {s['p50']:7.1f} {s['p90']:7.1f} {s['max']:7.1f} {s['mean']:8.1f}")
    print(f"plans that differ: {len(differ)} of {len(items)}")
    for instruction, a, b in differ:
        print(f"  {instruction!r}\n    onnx {a}\n    hf   {b}")
    print(
        json.dumps(
            {
                "bench": "instruct_onnx",
                "lines": len(items),
                "plans_differ": len(differ),
                "intent_accuracy_onnx": round(acc["onnx"], 4),
                "intent_accuracy_hf": round(acc["hf"], 4),
                "plan_p50_ms_onnx": round(stats["onnx"]["p50"], 2),
                "plan_p50_ms_hf": round(stats["hf"]["p50"], 2),
                "baseline": "transformers generate (HFGenerator), same model, same run",
                "ratio": round(stats["hf"]["p50"] / stats["onnx"]["p50"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
