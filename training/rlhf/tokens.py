"""Token-level plumbing shared by SFT, the reward model and RL: prompt + completion encoding, padding, and the
log-probabilities of completion tokens under a causal LM."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch

LENGTH_GROUP = 8  # batches drawn together and sorted by length (HF Trainer's group_by_length uses 50)


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


def length_grouped_batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> Iterator[list[int]]:
    """Endless batches of indices into `lengths`: each pass over the data is shuffled, cut into groups of
    LENGTH_GROUP batches, each group sorted by length and yielded as batches in random order. Every example is used
    once per pass, and a batch pads to its own longest sequence: on the base's SFT demonstrations (mean 104 tokens)
    random batches of 8 pad to 163 tokens a sequence, grouped ones to 112."""
    order = list(range(len(lengths)))
    while True:
        rng.shuffle(order)
        for g in range(0, len(order), batch_size * LENGTH_GROUP):
            group = sorted(order[g : g + batch_size * LENGTH_GROUP], key=lambda k: lengths[k])
            batches = [group[b : b + batch_size] for b in range(0, len(group), batch_size)]
            rng.shuffle(batches)
            yield from batches


def length_sorted_chunks(lengths: Sequence[int], size: int, indices: Sequence[int] | None = None) -> list[list[int]]:
    """`indices` (default: every index into `lengths`) sorted by length and cut into chunks of `size`: a chunk of
    similar lengths pads less. For passes whose results are summed or put back in place, so order does not matter."""
    ordered = sorted(range(len(lengths)) if indices is None else indices, key=lengths.__getitem__)
    return [ordered[k : k + size] for k in range(0, len(ordered), size)]


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
    return logp, place_completion_values(torch.zeros_like(logp), prompt_ids, [[1.0] * len(c) for c in completion_ids])


def place_completion_values(
    out: torch.Tensor, prompt_ids: Sequence[Sequence[int]], values: Sequence[Sequence[float] | None]
) -> torch.Tensor:
    """`out` [batch, longest sequence - 1] with each completion's per-token values written where
    completion_logprobs puts that completion's tokens (a row whose values are None is left as it is)."""
    for i, (p, v) in enumerate(zip(prompt_ids, values, strict=True)):
        if v is not None:
            out[i, len(p) - 1 : len(p) - 1 + len(v)] = torch.tensor(v, dtype=out.dtype)
    return out
