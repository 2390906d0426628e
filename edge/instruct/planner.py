"""Instruction in, executable plan out: the one pipeline the instruction node, evaluation, preference collection
and RL all use (screen -> stop fast path -> prompt -> generate -> fill number slots -> parse -> clamp)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from edge.instruct.generator import MAX_NEW_TOKENS, Generator
from edge.instruct.plan import STOP, Plan, PlanError, parse_plan
from edge.instruct.prompt import model_input
from edge.instruct.safety import PlanLimits, clamp_plan, is_stop, screen_instruction
from edge.instruct.slots import fill_slots


@dataclass
class Planned:
    instruction: str  # as received
    screened: str  # what the model read
    output: str  # the model's text with its number slots filled in ("" when the model was not asked)
    valid: bool  # the output parsed as a plan (a fast-path stop counts as valid)
    plan: Plan  # what the robot executes: clamped, or STOP
    warnings: list[str] = field(default_factory=list)


class InstructionPlanner:
    def __init__(
        self, generator: Generator, limits: PlanLimits, constrained: bool = True, max_new_tokens: int = MAX_NEW_TOKENS
    ):
        self.generator, self.limits = generator, limits
        self.constrained, self.max_new_tokens = constrained, max_new_tokens

    def plan(self, instruction: object, state: str | None = None) -> Planned:
        return self.plan_many([instruction], [state])[0][0]

    def plan_many(
        self,
        instructions: Sequence[object],
        states: Sequence[str | None] | None = None,
        n: int = 1,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> list[list[Planned]]:
        """n plans per instruction (n > 1 wants temperature > 0)."""
        states = list(states) if states is not None else [None] * len(instructions)
        screened = [screen_instruction(text, self.limits) for text in instructions]
        ask = [i for i, (clean, _) in enumerate(screened) if clean and not is_stop(clean)]
        slots, chat = getattr(self.generator, "number_slots", False), getattr(self.generator, "chat_prompt", None)
        inputs = {i: model_input(screened[i][0], states[i], slots, chat) for i in ask}
        outputs = (
            self.generator.generate(
                [inputs[i].prompt for i in ask],
                n=n,
                temperature=temperature,
                max_new_tokens=self.max_new_tokens,
                constrained=self.constrained,
                seed=seed,
            )
            if ask
            else []
        )
        by_index = dict(zip(ask, outputs, strict=True))
        results = []
        for i, (text, (clean, warnings)) in enumerate(zip(instructions, screened, strict=True)):
            if i not in by_index:
                results.append([Planned(str(text), clean, "", True, STOP, list(warnings))] * n)
                continue
            results.append([self._finish(str(text), clean, c.text, inputs[i].numbers, warnings) for c in by_index[i]])
        return results

    def _finish(self, text: str, clean: str, output: str, numbers: list[float], warnings: list[str]) -> Planned:
        try:
            output = fill_slots(output, numbers)
            plan, clamp_warnings = clamp_plan(parse_plan(output), self.limits)
            return Planned(text, clean, output, True, plan, warnings + clamp_warnings)
        except PlanError as e:
            return Planned(text, clean, output, False, STOP, warnings + [f"model output is not a plan ({e}): stopping"])
