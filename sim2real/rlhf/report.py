"""`sim2real rlhf eval`: a model on an eval set, optionally against a baseline, as a table and a last JSON line.

Win rate of the model over the baseline, per item: by the reward model (higher r(prompt, plan) wins) and by the
simulated operator (the plan whose executed trajectory better meets the intent wins); ties count half.
"""

from __future__ import annotations

import argparse
import json

from training.rlhf import evaluate as ev


def run_eval(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from training.rlhf.generation import load_generator
    from training.rlhf.limits import limits_for

    items = ev.load_eval_set(args.eval_set)
    limits = limits_for(args.robot)
    constrained = not args.unconstrained
    results = ev.evaluate(load_generator(args.model, args.backend), items, limits, constrained)
    out = {
        "bench": "rlhf_eval",
        "model": args.model,
        "set": args.eval_set,
        "constrained": constrained,
        **ev.summarize(results),
    }
    table = Table(
        title=f"{args.eval_set}: {len(items)} instructions ({'constrained' if constrained else 'free'} "
        "decoding, greedy)"
    )
    for col in ("model", "JSON valid", "intent accuracy"):
        table.add_column(col, justify="right")
    table.add_row(args.model, f"{out['json_valid_rate']:.1%}", f"{out['intent_accuracy']:.1%}")
    if args.baseline:
        base = ev.evaluate(load_generator(args.baseline, args.backend), items, limits, constrained)
        summary = ev.summarize(base)
        out.update(
            baseline=args.baseline,
            baseline_json_valid_rate=summary["json_valid_rate"],
            baseline_intent_accuracy=summary["intent_accuracy"],
        )
        table.add_row(args.baseline, f"{summary['json_valid_rate']:.1%}", f"{summary['intent_accuracy']:.1%}")
        out["win_rate_operator"] = ev.operator_win_rate(results, base, args.robot)
        if args.reward:
            out["win_rate_reward_model"] = ev.reward_model_win_rate(results, base, args.reward)
    if args.samples > 0:
        sampled = ev.pass_at_k(
            load_generator(args.model, args.backend), items, limits, args.samples, args.temperature, constrained
        )
        out["sampled"] = sampled
        table.caption = (
            f"{args.samples} samples per line at temperature {args.temperature:g}: pass@1 "
            f"{sampled['pass_at_1']:.1%}, pass@{args.samples} {sampled[f'pass_at_{args.samples}']:.1%}"
        )
    console = Console(width=None if Console().is_terminal else 110)
    console.print(table)
    for key in ("win_rate_reward_model", "win_rate_operator"):
        if key in out:
            console.print(f"{key.replace('_', ' ')} of {args.model} over {args.baseline}: {out[key]:.1%}")
    if args.show_failures:
        for r in results:
            if not r.passed:
                console.print(
                    f"FAIL {r.item.instruction!r} -> {ev.scored_outputs([r])[0]}", markup=False, highlight=False
                )
    print(json.dumps(out))
    return 0
