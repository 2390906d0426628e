"""Evaluation: eval-set files, intent accuracy, JSON validity and win rates.

Eval set (JSONL): one object per line, {"instruction": str, "expect": {field: [min, max], ...}} with fields from
vx, vy, wz (time-weighted means over the plan), duration_s (total), distance_m (integral of vx), angle_rad
(integral of wz), any subset; an optional "steps" list holds such an object per step of the intended plan, in order
(intent.py: a step is a run of segments with the same velocities); an optional "state" string
(prompt.state_summary) defaults to standing still. A line passes when every listed field of the executed plan
(after clamping) is in its range and, with "steps", the plan has as many steps, each in its own ranges.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edge.instruct.generator import Generator
from edge.instruct.plan import format_plan
from edge.instruct.planner import InstructionPlanner, Planned
from edge.instruct.safety import PlanLimits
from training.errors import TrainingError
from training.rlhf.corpus import CorpusGenerator
from training.rlhf.intent import Expect, Steps, check_expect, check_steps, plan_passes


@dataclass
class EvalItem:
    instruction: str
    expect: Expect
    state: str | None = None
    steps: Steps | None = None


@dataclass
class ItemResult:
    item: EvalItem
    planned: Planned
    passed: bool


def load_eval_set(path: str | Path) -> list[EvalItem]:
    p = Path(path)
    if not p.is_file():
        raise TrainingError(f"eval set {p} does not exist")
    items = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("instruction"), str):
                raise ValueError('needs "instruction" (a string)')
            expect, steps = check_expect(row.get("expect")), check_steps(row.get("steps"))
            items.append(EvalItem(row["instruction"], expect, row.get("state"), steps))
        except (json.JSONDecodeError, ValueError) as e:
            raise TrainingError(f"{p}:{n}: {e}") from None
    if not items:
        raise TrainingError(f"eval set {p} is empty")
    return items


def corpus_items(pool: str, limits: PlanLimits, n: int, seed: int) -> list[EvalItem]:
    """Fresh generated examples as eval items (their target plans unused)."""
    return [
        EvalItem(e.instruction, e.expect, e.state, e.steps) for e in CorpusGenerator(pool, limits, seed).examples(n)
    ]


def write_eval_set(items: Sequence[EvalItem], path: str | Path) -> None:
    """Items in the eval-set format load_eval_set reads."""
    rows = []
    for i in items:
        row = {"instruction": i.instruction, "expect": i.expect, "state": i.state}
        if i.steps is not None:
            row["steps"] = list(i.steps)
        rows.append(json.dumps(row) + "\n")
    Path(path).write_text("".join(rows))


def evaluate(
    generator: Generator, items: Sequence[EvalItem], limits: PlanLimits, constrained: bool = True
) -> list[ItemResult]:
    """Greedy plans for every item, through the same pipeline as the robot (screen, generate, parse, clamp)."""
    planner = InstructionPlanner(generator, limits, constrained=constrained)
    planned = planner.plan_many([i.instruction for i in items], [i.state for i in items])
    return [
        ItemResult(item, p[0], plan_passes(p[0].plan, item.expect, item.steps))
        for item, p in zip(items, planned, strict=True)
    ]


def pass_at_k(
    generator: Generator,
    items: Sequence[EvalItem],
    limits: PlanLimits,
    k: int,
    temperature: float = 1.0,
    constrained: bool = True,
    seed: int = 0,
) -> dict:
    """Sample k plans per item: the share of samples that pass (pass@1 at this temperature) and of items with at
    least one passing sample (pass@k). RL with a group of k samples can only reinforce plans it samples, so the
    gap between pass@k and greedy accuracy bounds what it can learn on these items."""
    planner = InstructionPlanner(generator, limits, constrained=constrained)
    groups = planner.plan_many(
        [i.instruction for i in items], [i.state for i in items], n=k, temperature=temperature, seed=seed
    )
    ok = [
        [plan_passes(p.plan, item.expect, item.steps) for p in group] for item, group in zip(items, groups, strict=True)
    ]
    return {
        "pass_at_1": sum(map(sum, ok)) / (k * len(ok)),
        f"pass_at_{k}": sum(map(any, ok)) / len(ok),
        "temperature": temperature,
    }


def summarize(results: Sequence[ItemResult]) -> dict:
    n = len(results)
    return {
        "n": n,
        "json_valid_rate": sum(r.planned.valid for r in results) / n,
        "intent_accuracy": sum(r.passed for r in results) / n,
    }


def win_rate(scores: Sequence[float], baseline: Sequence[float], tie: float = 1e-6) -> float:
    """Share of items where `scores` beats `baseline`; a tie counts half."""
    wins = sum(1.0 if a > b + tie else 0.5 if abs(a - b) <= tie else 0.0 for a, b in zip(scores, baseline, strict=True))
    return wins / len(scores)


def scored_outputs(results: Sequence[ItemResult]) -> list[str]:
    """The text a reward model scores per item: the model's output, or for a fast-path stop (no model text) the
    plan the robot executes."""
    return [r.planned.output or format_plan(r.planned.plan) for r in results]


def operator_win_rate(
    results: Sequence[ItemResult], base: Sequence[ItemResult], robot: str = "rover", policy: str | None = None
) -> float:
    """Win rate of `results` over `base` (same items) by the simulated operator: the plan whose trajectory executed
    in the twin (through `policy`, or the wheel controller) better meets the item's intent wins."""
    from training.rlhf.execution import TwinExecutor
    from training.rlhf.operator import score_execution

    both = [*results, *base]
    runs = TwinExecutor(robot, policy=policy).execute([r.planned.plan for r in both])
    scores = [score_execution(e, r.item.expect, r.item.steps) for e, r in zip(runs, both, strict=True)]
    return win_rate(scores[: len(results)], scores[len(results) :], tie=0.02)


def reward_model_win_rate(results: Sequence[ItemResult], base: Sequence[ItemResult], reward_dir: str | Path) -> float:
    """Win rate of `results` over `base` (same items) by the reward model: the higher r(prompt, plan) wins."""
    from training.rlhf.reward_model import RewardScorer

    scorer = RewardScorer.load(reward_dir)
    instructions, states = [r.planned.screened for r in results], [r.item.state for r in results]
    return win_rate(
        scorer.score_plans(instructions, states, scored_outputs(results)),
        scorer.score_plans(instructions, states, scored_outputs(base)),
    )
