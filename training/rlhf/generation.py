"""Plan generation with transformers' generate (the trainer's own model, the instruction node's default
backend, the benchmark's baseline). engine.VLLMEngine has the same `generate` signature.
"""

from __future__ import annotations

import torch

from edge.instruct.generator import MAX_NEW_TOKENS, Completion, Generator
from edge.instruct.grammar import PlanGrammars, TokenGrammar
from edge.instruct.plan import plan_format_of
from edge.instruct.prompt import chat_prompt
from edge.instruct.slots import uses_number_slots
from training.errors import ConfigError
from training.rlhf.config import INSTRUCTION_BACKENDS
from training.rlhf.grammar import PlanConstraint, token_texts


class HFGenerator:
    """Batched generate on a loaded causal LM; prompts are left-padded."""

    def __init__(self, model, tokenizer, batch_size: int = 256):
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.number_slots = uses_number_slots(model.config)
        self.chat_prompt = chat_prompt(model.config)
        self.plan_format = plan_format_of(model.config)
        self._grammars: PlanGrammars | None = None  # built when first needed (unconstrained calls never need it)

    def _grammar(self, prompt: str) -> TokenGrammar:
        if self._grammars is None:
            self._grammars = PlanGrammars(
                token_texts(self.tokenizer), self.tokenizer.eos_token_id, self.number_slots, self.plan_format
            )
        return self._grammars.for_prompt(prompt)

    @torch.no_grad()
    def generate(
        self,
        prompts: list[str],
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = MAX_NEW_TOKENS,
        constrained: bool = True,
        seed: int | None = None,
        ignore_eos: bool = False,
    ) -> list[list[Completion]]:
        if seed is not None:
            torch.manual_seed(seed)
        tok, out = self.tokenizer, []
        was_training = self.model.training
        self.model.eval()
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            batch = tok(chunk, return_tensors="pt", padding=True).to(self.model.device)
            kwargs = (
                {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature > 0 else {"do_sample": False}
            )
            if constrained:  # one processor per call: it tracks the DFA state of each row of this batch
                grammars = [g for g in map(self._grammar, chunk) for _ in range(n)]  # each prompt's row n times
                kwargs["logits_processor"] = [PlanConstraint(grammars, max_new_tokens)]
            if ignore_eos:
                kwargs["min_new_tokens"] = max_new_tokens
            seqs = self.model.generate(
                **batch,
                max_new_tokens=max_new_tokens,
                num_return_sequences=n,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
                **kwargs,
            )
            new = seqs[:, batch["input_ids"].shape[1] :].tolist()
            for i in range(len(new) // n):
                out.append([self._completion(ids) for ids in new[i * n : (i + 1) * n]])
        self.model.train(was_training)
        return out

    def _completion(self, ids: list[int]) -> Completion:
        eos = self.tokenizer.eos_token_id
        if eos in ids:
            ids = ids[: ids.index(eos) + 1]
        else:
            ids = [t for t in ids if t != self.tokenizer.pad_token_id]
        return Completion(self.tokenizer.decode(ids, skip_special_tokens=True), ids)


def load_generator(model_dir: str, backend: str = INSTRUCTION_BACKENDS[0]) -> Generator:
    """A generator for a local model directory: "transformers" (HFGenerator) or "vllm" (engine.VLLMEngine)."""
    if backend not in INSTRUCTION_BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(INSTRUCTION_BACKENDS)}, got {backend!r}")
    if backend == "vllm":
        from training.rlhf.engine import VLLMEngine

        return VLLMEngine(model_dir)
    from training.rlhf.model import load_model

    return HFGenerator(*load_model(model_dir))
