"""RL's token loss: PPO's clipped surrogate, and its decoupled form for samples an older policy drew (async RL).

Decoupled PPO (Hilton et al. 2022, "Batch size-invariance for policy optimization"; AReaL's `use_decoupled_loss`)
separates the two roles pi_old plays in PPO: the clip keeps the update near the proximal policy pi_prox (the
policy before this update), and an importance weight pi_prox / pi_behaviour corrects for the behaviour policy
that sampled the tokens (the engine's weights, some updates older):

    -min(r A, clip(r, 1 - clip, 1 + clip) A) * min(pi_prox / pi_behaviour, cap),   r = pi / pi_prox

Without behaviour log-probs (synchronous RL: the policy before the update sampled the batch, behaviour =
proximal) the weight is left out, and with behaviour == proximal it is exactly 1, so both give PPO's loss.
The weight is truncated at `cap` (truncated importance sampling, as TRL's vLLM correction does); AReaL instead
drops tokens above its cap.
"""

from __future__ import annotations

import torch

__all__ = ["ppo_token_loss"]


def ppo_token_loss(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    adv: torch.Tensor,
    clip: float,
    behaviour_logp: torch.Tensor | None = None,
    behaviour_cap: float = 5.0,
) -> torch.Tensor:
    """Per-token loss [batch, tokens] (the caller masks and sums it): `logp` the current policy's token
    log-probs (with gradients), `prox_logp` the proximal policy's, `adv` [batch, 1] each sample's advantage,
    `behaviour_logp` the sampling policy's where it is not the proximal one."""
    ratio = torch.exp(logp - prox_logp)
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    if behaviour_logp is not None:
        surrogate = surrogate * torch.exp(prox_logp - behaviour_logp).clamp(max=behaviour_cap)
    return -surrogate
