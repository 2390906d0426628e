"""Constrained decoding for transformers' generate: the plan grammar's numpy tables (edge.instruct.grammar, the ones
the robot's ONNX runtime decodes with) as a LogitsProcessor, so both decode with the same grammar."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor

from edge.instruct.grammar import GrammarMask, TokenGrammar


def token_texts(tokenizer) -> list[str | None]:
    """A transformers tokenizer's vocabulary as TokenGrammar reads it: each token's text, None for special tokens."""
    special = set(tokenizer.all_special_ids)
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return [
        None if tid in special or tok is None else tokenizer.convert_tokens_to_string([tok])
        for tid, tok in enumerate(tokens)
    ]


class PlanConstraint(LogitsProcessor):
    """The logits processor of one generate call (edge.instruct.grammar.GrammarMask over its rows)."""

    def __init__(self, grammars: Sequence[TokenGrammar], max_new_tokens: int):
        self.mask = GrammarMask(grammars, max_new_tokens)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # the first call sees the prompts only: no token of this call's yet
        last = input_ids[:, -1].tolist() if self.mask.generated >= 0 else None
        allowed = torch.from_numpy(self.mask.step(last)).to(scores.device)
        return scores.masked_fill(~allowed, float("-inf"))
