"""The prompt the instruction model reads: a short robot-state summary and the (screened) instruction.

The completion is the plan in the strict grammar followed by the end-of-sequence token. The prompt ends with
"plan:" and no space, so the plan's first token is the same whether it is tokenized alone or after the prompt.
"""

from __future__ import annotations


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
