"""The prompt the instruction model reads: a short robot-state summary and the (screened) instruction.

The completion is the plan in the strict grammar followed by the end-of-sequence token. The prompt ends with
"plan:" and no space, so the plan's first token is the same whether it is tokenized alone or after the prompt.
"""

from __future__ import annotations

from typing import NamedTuple

from edge.instruct.slots import split_numbers


def state_summary(vx: float = 0.0, wz: float = 0.0) -> str:
    """The robot's measured base motion in words (from /odom on the robot): "stopped", "moving forward, turning
    left", ... Words, not numbers, so the only numbers in the prompt are the instruction's."""
    parts = []
    if abs(vx) >= 0.05:
        parts.append("moving forward" if vx > 0 else "moving backward")
    if abs(wz) >= 0.05:
        parts.append("turning left" if wz > 0 else "turning right")
    return ", ".join(parts) or "stopped"


def build_prompt(instruction: str, state: str | None = None) -> str:
    return f"state: {state or state_summary()}\ninstruction: {instruction}\nplan:"


class ModelInput(NamedTuple):
    prompt: str
    numbers: list[float]  # what the prompt's slots #1, #2, ... stand for (empty for a model without slots)
    kinds: list[str]  # per number: "rate" or "span" (slots.py)


def model_input(instruction: str, state: str | None, number_slots: bool) -> ModelInput:
    """The prompt for a screened instruction; a model with number slots reads its numbers as #1, #2, ..."""
    if not number_slots:
        return ModelInput(build_prompt(instruction, state), [], [])
    text, numbers, kinds = split_numbers(instruction)
    return ModelInput(build_prompt(text, state), numbers, kinds)
