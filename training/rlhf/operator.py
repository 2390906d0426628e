"""The scripted simulated operator: executes both candidate plans in the twin and prefers the one whose trajectory
better meets the instruction's intent (its totals and, when it has them, each step in order: intent.py). It stands
in for a person in tests, demos and the default pipeline.

`noise` > 0 makes it a Bradley-Terry rater (prefers A with probability sigmoid((score_A - score_B) / noise)),
like a person who sometimes picks the worse plan; 0 always picks the better one. Near-equal scores are ties, and
so are two plans that both miss (neither scores `skip_below`): a person shown two wrong plans presses Skip, and
which of two wrong multi-step plans has the closer sums is a preference no reader of the plans can reproduce (the
reward model ranked such held-out pairs at 76%, the others at 88%; docs/results/rlhf.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from edge.instruct.plan import Plan
from training.rlhf.execution import Execution, TwinExecutor
from training.rlhf.intent import EXECUTION_SLACK, Expect, Steps, intent_score, steps_score


class SimulatedOperator:
    def __init__(
        self, executor: TwinExecutor, noise: float = 0.0, tie: float = 0.02, skip_below: float = 0.5, seed: int = 0
    ):
        self.executor, self.noise, self.tie, self.skip_below = executor, noise, tie, skip_below
        self.rng = random.Random(seed)

    def scores(
        self, plans: Sequence[Plan], expects: Sequence[Expect], steps: Sequence[Steps | None] | None = None
    ) -> list[float]:
        """Intent score of each plan's executed trajectory (1 = meets every range)."""
        runs = self.executor.execute(plans)
        per_step = steps if steps is not None else [None] * len(plans)
        return [score_execution(e, x, s) for e, x, s in zip(runs, expects, per_step, strict=True)]

    def choose(self, score_a: float, score_b: float) -> str | None:
        """'a', 'b', or None for a tie (near-equal scores, or both below skip_below)."""
        if abs(score_a - score_b) < self.tie or max(score_a, score_b) < self.skip_below:
            return None
        if self.noise <= 0:
            return "a" if score_a > score_b else "b"
        p_a = 1.0 / (1.0 + math.exp(-(score_a - score_b) / self.noise))
        return "a" if self.rng.random() < p_a else "b"


def score_execution(execution: Execution, expect: Expect, steps: Steps | None = None) -> float:
    """The totals' score times, when the intent has steps, the steps' (each executed step against its own)."""
    total = intent_score(execution.metrics, expect, EXECUTION_SLACK)
    return total if steps is None else total * steps_score(execution.steps, steps, EXECUTION_SLACK)
