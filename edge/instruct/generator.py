"""The generator interface the planner runs over: prompts in, completions out. The training side implements it
with transformers (training.rlhf.generation.HFGenerator) and vLLM (training.rlhf.engine.VLLMEngine); the robot with
ONNX Runtime (edge.instruct.onnx_generator.OnnxGenerator, on an exported model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

MAX_NEW_TOKENS = 192  # a 4-segment plan is ~100 tokens with the project's tokenizer


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    logprobs: list[float] | None = None  # each token's log-probability as sampled, where the generator was asked


class Generator(Protocol):
    def generate(
        self,
        prompts: list[str],
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = MAX_NEW_TOKENS,
        constrained: bool = True,
        seed: int | None = None,
        ignore_eos: bool = False,
    ) -> list[list[Completion]]: ...
