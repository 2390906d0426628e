"""The prompt the instruction model reads: a short robot-state summary and the (screened) instruction.

The completion is the plan in the strict grammar followed by the end-of-sequence token. The prompt ends with
"plan:" and no space, so the plan's first token is the same whether it is tokenized alone or after the prompt.

A model fine-tuned from a pretrained chat model reads the same text as its user turn, in its own chat template.
The template is rendered once at training time (training.rlhf.model.chat_prompt_of) into a string with CHAT_SLOT
where the user turn goes, and kept in the model's config (`chat_prompt`) and the exported manifest, so the robot
wraps prompts without a template engine.
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


CHAT_SLOT = "{prompt}"


def chat_prompt(config) -> str | None:
    """A model's rendered chat template (its transformers config, config.json as a dict, or an exported manifest),
    None for a model that reads the plain prompt."""
    value = config.get("chat_prompt") if isinstance(config, dict) else getattr(config, "chat_prompt", None)
    return value or None


def in_chat(prompt: str, chat: str | None) -> str:
    """`prompt` as the user turn of a rendered chat template (unchanged without one)."""
    return chat.replace(CHAT_SLOT, prompt, 1) if chat else prompt


class ModelInput(NamedTuple):
    prompt: str
    numbers: list[float]  # what the prompt's slots #1, #2, ... stand for (empty for a model without slots)
    kinds: list[str]  # per number: "rate" or "span" (slots.py)


def model_input(instruction: str, state: str | None, number_slots: bool, chat: str | None = None) -> ModelInput:
    """The prompt for a screened instruction; a model with number slots reads its numbers as #1, #2, ...; `chat`:
    the model's rendered chat template (chat_prompt), if it has one."""
    if not number_slots:
        return ModelInput(in_chat(build_prompt(instruction, state), chat), [], [])
    text, numbers, kinds = split_numbers(instruction)
    return ModelInput(in_chat(build_prompt(text, state), chat), numbers, kinds)
