"""Group-relative advantages: GRPO has no critic, so a sample's advantage is its reward against the other samples
of its prompt's group. Pure functions of the rewards and the group sizes (no trainer state), so each estimator
(`RLConfig.advantage`) can be checked by hand (tests/test_rlhf_advantages.py).

- grpo: the rewards standardised within each group; the token loss is divided by the batch's plan tokens.
- dr_grpo (Dr. GRPO, Liu et al. 2025, "Understanding R1-Zero-like training"; TRL's loss_type "dr_grpo"): only
  the group mean is subtracted, and the token loss is divided by a constant (samples x max new tokens), so neither
  a group's spread nor a plan's length scales its gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from training.rlhf.config import ADVANTAGES

# grpo's denominator is std + STD_EPS: a group whose rewards are all equal (std 0) gets advantages 0, not 0/0
STD_EPS = 1e-4


def group_advantages(reward: torch.Tensor, sizes: Sequence[int], estimator: str) -> torch.Tensor:
    """Each sample's advantage. `reward` holds the groups one after another, `sizes` their lengths (an explored
    group holds one sample more than the others). grpo's std is torch's, with Bessel's correction, so a group of
    one has none (NaN): RLConfig asks for groups of 2 or more."""
    _check(estimator)
    if sum(sizes) != len(reward):
        raise ValueError(f"group sizes sum to {sum(sizes)}, but there are {len(reward)} rewards")
    per_group, counts = reward.split(list(sizes)), torch.tensor(sizes)
    centred = reward - torch.stack([r.mean() for r in per_group]).repeat_interleave(counts)
    if estimator == "dr_grpo":
        return centred
    return centred / (torch.stack([r.std() for r in per_group]).repeat_interleave(counts) + STD_EPS)


def loss_normaliser(plan_lengths: Sequence[int], estimator: str, max_new_tokens: int) -> int:
    """What the token loss, summed over the batch, is divided by: grpo, the plans' tokens (the batch's mean token
    loss); dr_grpo, samples x `max_new_tokens`, the same for every batch of that many samples."""
    _check(estimator)
    if estimator == "dr_grpo":
        return len(plan_lengths) * max_new_tokens
    return sum(plan_lengths)


def _check(estimator: str) -> None:
    if estimator not in ADVANTAGES:
        raise ValueError(f"advantage estimator must be one of {', '.join(ADVANTAGES)}, got {estimator!r}")
