"""Token-level plumbing shared by SFT, the reward model and RL: prompt + completion encoding, padding, and the
log-probabilities of completion tokens under a causal LM."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def encode_completion(tokenizer, completion: str) -> list[int]:
    """A completion's tokens with the end-of-sequence token, as the model is trained to write them."""
    return tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def pad_right(seqs: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention_mask), right-padded to the longest sequence."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def completion_logprobs(
    model, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]], pad: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of each completion after its prompt, and the mask of completion tokens;
    both [batch, longest sequence - 1], on the CPU whatever the model's device (the rewards, advantages and masks
    they meet are CPU tensors; the copy is one float per token). Gradients flow unless the caller disables them."""
    seqs = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
    ids, attn = (t.to(model.device) for t in pad_right(seqs, pad))
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1).cpu()
    mask = torch.zeros_like(logp)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        mask[i, len(p) - 1 : len(p) - 1 + len(c)] = 1.0
    return logp, mask
