"""The robot's instruction runtime (ONNX Runtime, edge.instruct.onnx_generator) beside transformers' generate
(training.rlhf.generation.HFGenerator) on the same model, in the same run: greedy constrained plans on an eval set
(how many are the same, intent accuracy of both) and the latency of one plan as instruction_node makes it
(InstructionPlanner.plan, one instruction at a time, after one warm-up plan). With `--int8`, the same model exported
with int8 weights (ONNX Runtime's dynamic quantisation) is a third row.

Every generator runs on one thread (torch.set_num_threads(1), ONNX Runtime intra-op 1). The model is exported to a
temporary directory first (training.rlhf.export_onnx).

    python -m benchmarks.instruct_onnx --model runs/rlhf/rl [--set phrasings] [--int8] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

SETS = Path(__file__).resolve().parents[1] / "config" / "rlhf"


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
    parser.add_argument("--quick", action="store_true", help="latency on the first 30 lines only")
    parser.add_argument("--set", default="heldout", choices=("heldout", "phrasings"), help="config/rlhf/<set>.jsonl")
    parser.add_argument("--int8", action="store_true", help="also the export with int8 weights")
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
    items, limits = load_eval_set(SETS / f"{args.set}.jsonl"), limits_for(args.robot)
    timed = items[:30] if args.quick else items
    rows = {}  # name -> (results, latencies in ms, export seconds)
    with tempfile.TemporaryDirectory() as tmp:
        generators = {"transformers generate (HFGenerator)": (HFGenerator(*load_model(args.model)), 0.0)}
        for weights in ("float32", "int8") if args.int8 else ("float32",):
            start = time.perf_counter()
            export_instruction_model(args.model, Path(tmp) / weights, weights=weights)
            onnx = OnnxGenerator(Path(tmp) / weights, providers_for("cpu"), threads=1)
            generators[f"ONNX Runtime, {weights} weights"] = (onnx, time.perf_counter() - start)
        for name, (generator, export_s) in generators.items():
            planner = InstructionPlanner(generator, limits)
            rows[name] = (evaluate(generator, items, limits), _latency_ms(planner, timed), export_s)
    hf_name, float_name = list(rows)[:2]
    reference = rows[hf_name][0]
    print(f"model {args.model}; {args.set} set, {len(items)} lines, greedy, constrained; latency over {len(timed)}")
    columns = ("accuracy", "differ", "p50 ms", "p90 ms", "mean ms", "export s")
    print(f"{'generator':36s} " + " ".join(f"{c:>8s}" for c in columns))
    figures = {}
    for name, (results, ms, export_s) in rows.items():
        differ = sum(a.planned.output != b.planned.output for a, b in zip(results, reference, strict=True))
        acc = summarize(results)["intent_accuracy"]
        p50, p90 = ms[len(ms) // 2], ms[int(0.9 * len(ms))]
        print(f"{name:36s} {acc:8.1%} {differ:8d} {p50:8.1f} {p90:8.1f} {statistics.mean(ms):8.1f} {export_s:8.1f}")
        figures[name] = {"intent_accuracy": round(acc, 4), "plans_differ": differ, "p50_ms": round(p50, 2)}
    for a, b in zip(rows[float_name][0], reference, strict=True):
        if a.planned.output != b.planned.output:
            print(f"  {a.item.instruction!r}\n    onnx {a.planned.output}\n    hf   {b.planned.output}")
    print(
        json.dumps(
            {
                "bench": "instruct_onnx",
                "set": args.set,
                "lines": len(items),
                "generators": figures,
                "baseline": "transformers generate (HFGenerator), same model, same run",
                "ratio": round(figures[hf_name]["p50_ms"] / figures[float_name]["p50_ms"], 2),
                "load_1min": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
