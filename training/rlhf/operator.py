"""The scripted simulated operator: executes both candidate plans in the twin and prefers the one whose trajectory
better meets the instruction's intent. It stands in for a person in tests, demos and the default pipeline.

`noise` > 0 makes it a Bradley-Terry rater (prefers A with probability sigmoid((score_A - score_B) / noise)),
like a person who sometimes picks the worse plan; 0 always picks the better one. Near-equal scores are ties, and
so are two plans that both miss (neither scores `skip_below`): a person shown two wrong plans presses Skip, and
which of two wrong multi-step plans has the closer sums is a preference no reader of the plans can reproduce (the
reward model ranked such held-out pairs at 76%, the others at 88%; docs/rlhf.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from edge.instruct.plan import Plan
from training.rlhf.execution import Execution, TwinExecutor
from training.rlhf.intent import EXECUTION_SLACK, Expect, intent_score


class SimulatedOperator:
    def __init__(
        self, executor: TwinExecutor, noise: float = 0.0, tie: float = 0.02, skip_below: float = 0.5, seed: int = 0
    ):
        self.executor, self.noise, self.tie, self.skip_below = executor, noise, tie, skip_below
        self.rng = random.Random(seed)

    def scores(self, plans: Sequence[Plan], expects: Sequence[Expect]) -> list[float]:
        """Intent score of each plan's executed trajectory (1 = meets every range)."""
        return [score_execution(e, x) for e, x in zip(self.executor.execute(plans), expects, strict=True)]

    def choose(self, score_a: float, score_b: float) -> str | None:
        """'a', 'b', or None for a tie (near-equal scores, or both below skip_below)."""
        if abs(score_a - score_b) < self.tie or max(score_a, score_b) < self.skip_below:
            return None
        if self.noise <= 0:
            return "a" if score_a > score_b else "b"
        p_a = 1.0 / (1.0 + math.exp(-(score_a - score_b) / self.noise))
        return "a" if self.rng.random() < p_a else "b"


def score_execution(execution: Execution, expect: Expect) -> float:
    return intent_score(execution.metrics, expect, EXECUTION_SLACK)
